"""The rule interface: one class per code, with its message and its visitor."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import ClassVar

from torchleak.check.context import ModuleIndex
from torchleak.check.diagnostic import SAFE, UNSAFE, Edit, Fix
from torchleak.check.taint import Taint


@dataclass
class Analysis:
    """Everything a rule may look at for one module; built once, shared by all rules."""

    path: str
    lines: list[str]
    index: ModuleIndex
    taint: Taint = field(init=False)

    def __post_init__(self) -> None:
        self.index.cache["path"] = self.path
        self.taint = Taint(self.index)

    def char_col(self, line: int, byte_col: int) -> int:
        """ast columns count UTF-8 bytes; people and editors count characters."""
        if 1 <= line <= len(self.lines):
            text = self.lines[line - 1]
            if text.isascii():
                return byte_col
            return len(text.encode("utf-8")[:byte_col].decode("utf-8", "replace"))
        return byte_col

    def segment(self, node: ast.AST) -> str:
        """The exact source text of a node (one or more lines)."""
        start = (node.lineno, self.char_col(node.lineno, node.col_offset))
        end = (node.end_lineno or node.lineno,
               self.char_col(node.end_lineno or node.lineno, node.end_col_offset or 0))
        if start[0] == end[0]:
            return self.lines[start[0] - 1][start[1]:end[1]]
        parts = [self.lines[start[0] - 1][start[1]:]]
        parts += self.lines[start[0]:end[0] - 1]
        parts.append(self.lines[end[0] - 1][:end[1]])
        return "\n".join(parts)

    def insert_after(self, node: ast.AST, text: str) -> Edit:
        line = node.end_lineno or node.lineno
        col = self.char_col(line, node.end_col_offset or 0) + 1
        return Edit(line, col, line, col, text)

    def replace(self, node: ast.AST, text: str) -> Edit:
        end = node.end_lineno or node.lineno
        return Edit(node.lineno, self.char_col(node.lineno, node.col_offset) + 1, end,
                    self.char_col(end, node.end_col_offset or 0) + 1, text)


@dataclass(frozen=True)
class Finding:
    node: ast.AST
    message: str
    fix: Fix | None = None


class Rule:
    """Subclasses set the class attributes, implement ``check`` and document themselves
    in their docstring (what it does / why is this bad? / example / fix safety): that
    docstring is what ``--explain`` prints and what the rules page is made of."""

    code: ClassVar[str]
    name: ClassVar[str]
    summary: ClassVar[str]  # one line for ``--list-rules`` and the docs index
    fix_availability: ClassVar[str] = "never"  # "always", "sometimes" or "never"

    @property
    def default_on(self) -> bool:
        return not self.code.startswith("TL4")

    def check(self, a: Analysis) -> Iterator[Finding]:
        raise NotImplementedError


def append_method_fix(a: Analysis, value: ast.AST, method: str, safe: bool) -> Fix:
    """``loss`` -> ``loss.item()``; wraps operators in parentheses first."""
    applicability = SAFE if safe else UNSAFE
    simple = isinstance(value, (ast.Name, ast.Attribute, ast.Call, ast.Subscript))
    if simple:
        return Fix(f"Add `.{method}()`", (a.insert_after(value, f".{method}()"),),
                   applicability)
    return Fix(f"Add `.{method}()`", (a.replace(value, f"({a.segment(value)}).{method}()"),),
               applicability)
