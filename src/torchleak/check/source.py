"""A source file as bytes and as text, and how to turn text back into the same bytes.

Positions follow ``ast``: lines end only at ``\\n``, ``\\r\\n`` or ``\\r`` (Python's own
tokenizer), never at the form feed, NEL or U+2028/U+2029 that ``str.splitlines`` also
splits on; columns in ``ast`` count UTF-8 bytes of the line.
"""

from __future__ import annotations

import io
import re
import tokenize
from dataclasses import dataclass

_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$")


def split_lines(text: str, keepends: bool = False) -> list[str]:
    """Lines as the Python tokenizer sees them."""
    if not keepends and "\r" not in text:  # the common case, fast
        lines = text.split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        return lines
    lines = _LINE.findall(text)
    if keepends:
        return lines
    return [line.rstrip("\r\n") for line in lines]


def newline_of(text: str) -> str:
    """The file's newline style, from its first line break (``\\n`` when there is none)."""
    match = re.search(r"\r\n|\r|\n", text)
    return match.group(0) if match else "\n"


@dataclass(frozen=True)
class SourceText:
    """Decoded text plus what it takes to write it back byte for byte."""

    text: str
    encoding: str  # as ``tokenize.detect_encoding`` names it; ``utf-8-sig`` keeps a BOM

    @classmethod
    def decode(cls, data: bytes) -> SourceText:
        """Raises ``SyntaxError`` (bad coding cookie), ``LookupError`` or
        ``UnicodeDecodeError``."""
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
        return cls(data.decode(encoding), encoding)

    def encode(self, text: str) -> bytes:
        """``text`` in the file's own encoding (BOM included); raises
        ``UnicodeEncodeError`` when the encoding cannot hold it."""
        return text.encode(self.encoding)
