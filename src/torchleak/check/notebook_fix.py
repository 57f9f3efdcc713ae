"""Apply fixes inside a notebook's code cells and write the notebook back unchanged
elsewhere: the JSON layout (indent, key order, escaping, final newline) is found by
re-serialising the untouched notebook; when no layout reproduces it byte for byte, the
notebook is left alone rather than reformatted."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from torchleak.check.diagnostic import Diagnostic, Edit, Fix
from torchleak.check.fixes import apply_fixes, fixable, verified
from torchleak.check.notebook import Combined, _combined_diagnostics, check_notebook
from torchleak.check.selection import Selection
from torchleak.check.source import split_lines

_LAYOUTS = [dict(indent=i, sort_keys=k, ensure_ascii=a)
            for i in (1, 2, 4, None) for k in (True, False) for a in (False, True)]


def json_layout(text: str, notebook: Any) -> tuple[dict[str, Any], str] | None:
    """The ``json.dumps`` options and trailing text that reproduce ``text`` exactly."""
    for layout in _LAYOUTS:
        try:
            dumped = json.dumps(notebook, **layout)
        except (TypeError, ValueError, RecursionError):
            return None
        for tail in ("\n", "", "\r\n"):
            if dumped + tail == text:
                return layout, tail
    return None


def fix_cells(text: str, path: str, selection: Selection, wanted: list[Diagnostic],
              unsafe: bool) -> tuple[str, list[Diagnostic], str]:
    """The fixed notebook text, the (notebook-coordinate) diagnostics fixed, and a line
    saying why nothing was fixed when that happens."""
    notebook = json.loads(text)
    layout = json_layout(text, notebook)
    if layout is None:
        return text, [], "fixes not applied: the notebook's JSON layout cannot be kept " \
                         "(save it from Jupyter first)"
    found, combined = _combined_diagnostics(text, path, selection)
    if combined is None:
        return text, [], ""
    wanted_set = set(wanted)
    per_cell: dict[int, list[tuple[Diagnostic, Diagnostic]]] = {}
    for d in found:
        shown = _shown(d, combined)
        if shown in wanted_set and fixable(d, unsafe):
            moved = _to_cell(d, combined, notebook["cells"])
            if moved is not None:
                per_cell.setdefault(moved[0], []).append((moved[1], shown))
    applied = _apply(notebook["cells"], per_cell)
    if not applied:
        return text, [], ""
    fixed = json.dumps(notebook, **layout[0]) + layout[1]

    def recheck(new: str) -> list[Diagnostic]:
        return check_notebook(new, path, selection)

    if not verified(fixed, check_notebook(text, path, selection), applied, recheck,
                    python=False):
        return text, [], "fixes not applied: the fixed notebook did not check out " \
                         "(please report it)"
    return fixed, applied, ""


def _shown(d: Diagnostic, combined: Combined) -> Diagnostic:
    origin = combined.origin
    cell, line = origin[d.line - 1] if 0 < d.line <= len(origin) else (None, d.line)
    end = origin[d.end_line - 1][1] if 0 < d.end_line <= len(origin) else line
    return replace(d, line=line, cell=cell, end_line=end)


def _to_cell(d: Diagnostic, combined: Combined,
             cells: list[Any]) -> tuple[int, Diagnostic] | None:
    """The fix in the coordinates of its one cell; None when it spans cells or touches a
    line that was rewritten for analysis (an IPython magic)."""
    assert d.fix is not None
    origin = combined.origin
    combined_lines = split_lines(combined.source)
    edits: list[Edit] = []
    number = None
    for e in d.fix.edits:
        if not (0 < e.line <= len(origin) and 0 < e.end_line <= len(origin)):
            return None
        (cell, start), (cell_end, end) = origin[e.line - 1], origin[e.end_line - 1]
        if cell != cell_end or (number is not None and cell != number):
            return None
        number = cell
        original = split_lines(_cell_text(cells[cell - 1]))
        for line in range(e.line, e.end_line + 1):
            in_cell = origin[line - 1][1]
            if original[in_cell - 1] != combined_lines[line - 1]:
                return None
        edits.append(Edit(start, e.col, end, e.end_col, e.text))
    if number is None:
        return None
    return number, replace(d, fix=Fix(d.fix.message, tuple(edits), d.fix.applicability))


def _apply(cells: list[Any], per_cell: dict[int, list[tuple[Diagnostic, Diagnostic]]]
           ) -> list[Diagnostic]:
    applied: list[Diagnostic] = []
    for number, pairs in per_cell.items():
        cell = cells[number - 1]
        before = _cell_text(cell)
        after, done = apply_fixes(before, [local for local, _ in pairs], unsafe=True)
        if not done:
            continue
        cell["source"] = split_lines(after, keepends=True) \
            if isinstance(cell.get("source"), list) else after
        done_ids = {id(x) for x in done}
        applied += [shown for local, shown in pairs if id(local) in done_ids]
    return applied


def _cell_text(cell: Any) -> str:
    source = cell.get("source", "") if isinstance(cell, dict) else ""
    if isinstance(source, list):
        return "".join(s for s in source if isinstance(s, str))
    return source if isinstance(source, str) else ""
