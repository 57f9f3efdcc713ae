"""Plain aligned tables (psql style) for query and ls: stable when piped, no wrapping."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from torchleak.views.inert import shown


def cell(value: Any) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, float):
        return f"{value:.6g}" if abs(value) < 1e6 else f"{value:.0f}"
    if isinstance(value, bytes):
        return f"<{len(value)} bytes>"
    return shown(str(value))  # a query's text comes from the trace as it was


def format_table(columns: Sequence[str], rows: Sequence[Sequence[Any]], footer: str | None = None) -> str:
    """Numbers right-aligned, text left; ``footer`` (e.g. '(3 rows)') on the last line."""
    cells = [[cell(v) for v in row] for row in rows]
    widths = [max([len(c)] + [len(r[i]) for r in cells]) for i, c in enumerate(columns)]
    numeric = [bool(rows) and all(isinstance(row[i], (int, float)) or row[i] is None for row in rows)
               for i in range(len(columns))]
    lines = [_join(list(columns), widths, [False] * len(widths)),
             "-+-".join("-" * w for w in widths)]
    lines += [_join(r, widths, numeric) for r in cells]
    if footer:
        lines.append(footer)
    return "\n".join(lines) + "\n"


def _join(values: Sequence[str], widths: list[int], right: list[bool]) -> str:
    return " | ".join(v.rjust(w) if r else v.ljust(w) for v, w, r in zip(values, widths, right)).rstrip()
