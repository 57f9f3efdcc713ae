"""Apply the safe fixes as text edits and show them as a unified diff.

Fixes are computed from exact ``ast`` positions, so rewriting needs no concrete syntax
tree; the result is re-parsed and thrown away if it would not compile.
"""

from __future__ import annotations

import ast
import difflib

from torchleak.check.diagnostic import Diagnostic, Edit


def apply_fixes(source: str, diagnostics: list[Diagnostic]) -> tuple[str, list[Diagnostic]]:
    """The fixed source and the diagnostics whose fixes were applied."""
    lines = source.splitlines(keepends=True)
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line))

    def at(line: int, col: int) -> int:
        if line - 1 >= len(lines):
            return len(source)
        text = lines[line - 1].rstrip("\r\n")
        return offsets[line - 1] + min(col - 1, len(text))

    chosen: list[tuple[int, int, str]] = []
    applied: list[Diagnostic] = []
    taken: list[tuple[int, int]] = []
    for d in sorted((d for d in diagnostics if d.fix), key=Diagnostic.sort_key):
        spans = [(at(e.line, e.col), at(e.end_line, e.end_col), e.text) for e in _edits(d)]
        if any(_overlap(s, e, ts, te) for s, e, _ in spans for ts, te in taken):
            continue  # a later run of --fix picks it up
        chosen.extend(spans)
        taken.extend((s, e) for s, e, _ in spans)
        applied.append(d)
    fixed = source
    for start, end, text in sorted(chosen, key=lambda x: (x[0], x[1]), reverse=True):
        fixed = fixed[:start] + text + fixed[end:]
    try:
        ast.parse(fixed)
    except (SyntaxError, ValueError, RecursionError):
        return source, []
    return fixed, applied


def _edits(d: Diagnostic) -> tuple[Edit, ...]:
    return d.fix.edits if d.fix else ()


def _overlap(s: int, e: int, ts: int, te: int) -> bool:
    if s == e == ts == te:
        return True
    return s < te and ts < e


def unified_diff(path: str, before: str, after: str) -> str:
    return "".join(difflib.unified_diff(before.splitlines(keepends=True),
                                        after.splitlines(keepends=True),
                                        fromfile=f"a/{path}", tofile=f"b/{path}"))
