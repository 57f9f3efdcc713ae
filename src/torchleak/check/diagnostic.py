"""What a rule reports: a ``Diagnostic`` at a source position, with an optional ``Fix``."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Edit:
    """Replace the text between two 1-based (line, col) positions; cols count characters."""

    line: int
    col: int
    end_line: int
    end_col: int
    text: str


SAFE = "safe"
UNSAFE = "unsafe"


@dataclass(frozen=True)
class Fix:
    """A rewrite. ``safe`` ones cannot change what the program does and ``--fix`` applies
    them; ``unsafe`` ones may (a value changes type, a figure closes before a later use)
    and need ``--unsafe-fixes``."""

    message: str
    edits: tuple[Edit, ...]
    applicability: str = SAFE

    @property
    def safe(self) -> bool:
        return self.applicability == SAFE


@dataclass(frozen=True)
class Diagnostic:
    """One finding. ``line``/``col`` are 1-based; ``col`` counts characters, not bytes.

    For notebooks ``cell`` is the 1-based code-cell number and ``line`` is the line in
    that cell.
    """

    path: str
    line: int
    col: int
    code: str
    message: str
    fix: Fix | None = None
    end_line: int = 0
    end_col: int = 0
    cell: int | None = None
    # The line number inside the analysed text (differs from ``line`` in notebooks);
    # fixes and noqa comments are resolved against it.
    source_line: int = field(default=0, compare=False, repr=False)

    @property
    def location(self) -> str:
        if self.cell is not None:
            return f"{self.path}:cell {self.cell}:{self.line}:{self.col}"
        return f"{self.path}:{self.line}:{self.col}"

    def sort_key(self) -> tuple[str, int, int, int, str]:
        return (self.path, self.cell or 0, self.line, self.col, self.code)
