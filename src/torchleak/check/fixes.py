"""Apply fixes as text edits, check the result, and show it as a unified diff.

Edits are placed with the positions ``ast`` reports (Python's own line splitting), inserted
line breaks follow the file's newline style, and every byte outside an edit stays as it
was. A result is kept only when it parses and checking it again shows that the fixed
findings are gone and nothing new appeared; otherwise the file is left alone.
"""

from __future__ import annotations

import difflib
from collections import Counter
from collections.abc import Callable, Sequence

from torchleak.check.diagnostic import Diagnostic, Edit
from torchleak.check.source import newline_of, split_lines


def fixable(d: Diagnostic, unsafe: bool) -> bool:
    """The diagnostic has a fix that this run may apply."""
    return d.fix is not None and (unsafe or d.fix.safe)


def apply_fixes(source: str, diagnostics: Sequence[Diagnostic],
                unsafe: bool = False) -> tuple[str, list[Diagnostic]]:
    """The fixed source and the diagnostics whose fixes were applied (safe fixes only,
    unless ``unsafe``). Overlapping fixes wait for the next run."""
    lines = split_lines(source, keepends=True)
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line))
    newline = newline_of(source)

    def at(line: int, col: int) -> int:
        if line - 1 >= len(lines):
            return len(source)
        text = lines[line - 1].rstrip("\r\n")
        return offsets[line - 1] + min(col - 1, len(text))

    chosen: list[tuple[int, int, str]] = []
    applied: list[Diagnostic] = []
    taken: list[tuple[int, int]] = []
    for d in sorted((d for d in diagnostics if fixable(d, unsafe)), key=Diagnostic.sort_key):
        spans = [(at(e.line, e.col), at(e.end_line, e.end_col), e.text.replace("\n", newline))
                 for e in _edits(d)]
        if any(_overlap(s, e, ts, te) for s, e, _ in spans for ts, te in taken):
            continue
        chosen.extend(spans)
        taken.extend((s, e) for s, e, _ in spans)
        applied.append(d)
    fixed = source
    for start, end, text in sorted(chosen, key=lambda x: (x[0], x[1]), reverse=True):
        fixed = fixed[:start] + text + fixed[end:]
    return fixed, applied


def verified(fixed: str, before: Sequence[Diagnostic], applied: Sequence[Diagnostic],
             recheck: Callable[[str], list[Diagnostic]], python: bool = True) -> bool:
    """The fixed text parses (when ``python``), and checking it again finds, for every
    code, at most what was found before minus what was fixed."""
    if python:
        from torchleak.check.engine import parse

        if parse(fixed, "<fixed>")[0] is None:
            return False
    after = Counter(d.code for d in recheck(fixed))
    expected = Counter(d.code for d in before)
    expected.subtract(Counter(d.code for d in applied))
    return all(after[code] <= max(expected[code], 0) for code in after)


def _edits(d: Diagnostic) -> tuple[Edit, ...]:
    return d.fix.edits if d.fix else ()


def _overlap(s: int, e: int, ts: int, te: int) -> bool:
    if s == e == ts == te:
        return True
    return s < te and ts < e


def unified_diff(path: str, before: str, after: str) -> str:
    return "".join(difflib.unified_diff(split_lines(before, keepends=True),
                                        split_lines(after, keepends=True),
                                        fromfile=f"a/{path}", tofile=f"b/{path}"))
