"""A ruff-style code frame under a diagnostic: the lines around it, with carets under the
reported code."""

from __future__ import annotations

import unicodedata

from torchleak.check.diagnostic import Diagnostic
from torchleak.check.source import split_lines

_CONTEXT = 2
_RED, _BLUE, _BOLD, _RESET = "\x1b[31m", "\x1b[34m", "\x1b[1m", "\x1b[0m"


def code_frame(d: Diagnostic, text: str, color: bool = False) -> str:
    lines = _lines_of(d, text)
    if not 1 <= d.line <= len(lines):
        return ""
    first = max(1, d.line - _CONTEXT)
    last = min(len(lines), d.line + _CONTEXT)
    while last > d.line and not lines[last - 1].strip():
        last -= 1
    width = len(str(last))
    blue = (lambda s: f"{_BLUE}{_BOLD}{s}{_RESET}") if color else (lambda s: s)
    gutter = blue(f"{'':>{width}} |")
    out = [gutter]
    for number in range(first, last + 1):
        shown = _display(lines[number - 1])
        out.append(f"{blue(f'{number:>{width}} |')} {shown}".rstrip())
        if number == d.line:
            out.append(f"{gutter} {_carets(d, lines[number - 1], color)}")
    out.append(gutter)
    return "\n".join(out)


def _lines_of(d: Diagnostic, text: str) -> list[str]:
    if d.cell is None:
        return split_lines(text)
    from torchleak.check.notebook import code_cells

    cells, error = code_cells(text, d.path)
    cell = next((c for c in cells if c.number == d.cell), None) if error is None else None
    return cell.lines if cell is not None else []


def _display(line: str) -> str:
    return line.replace("\t", "    ")


def _carets(d: Diagnostic, line: str, color: bool) -> str:
    start = max(d.col - 1, 0)
    end = d.end_col - 1 if d.end_line == d.line and d.end_col > d.col else len(line.rstrip())
    end = max(end, start + 1)
    pad = _width(line[:start])
    marks = "^" * max(_width(line[start:end]), 1)
    text = f"{' ' * pad}{marks} {d.code}"
    return f"{_RED}{_BOLD}{text}{_RESET}" if color else text


def _width(text: str) -> int:
    """Columns on a terminal: tabs as four, wide (CJK) characters as two."""
    total = 0
    for ch in text:
        if ch == "\t":
            total += 4
        elif unicodedata.combining(ch):
            continue
        else:
            total += 2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1
    return total
