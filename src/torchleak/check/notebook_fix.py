"""Apply fixes inside a notebook's code cells and write the notebook back unchanged
elsewhere: the JSON layout (indent, key order, escaping, final newline) is found by
re-serialising the untouched notebook; when no layout reproduces it byte for byte, the
notebook is left alone rather than reformatted."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from torchleak.check.diagnostic import Diagnostic
from torchleak.check.fixes import apply_fixes, fixable, verified
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


def fix_cells(text: str, wanted: list[Diagnostic], unsafe: bool,
              recheck: Callable[[str], list[Diagnostic]]) -> tuple[str, list[Diagnostic], str]:
    """The fixed notebook text, the diagnostics fixed, and a line saying why nothing was
    fixed when that happens. ``wanted`` are ``check_notebook`` diagnostics (cell
    coordinates, fixes included)."""
    per_cell: dict[int, list[Diagnostic]] = {}
    for d in wanted:
        if d.cell is not None and fixable(d, unsafe):
            per_cell.setdefault(d.cell, []).append(d)
    if not per_cell:
        return text, [], ""
    notebook = json.loads(text)
    layout = json_layout(text, notebook)
    if layout is None:
        return text, [], "fixes not applied: the notebook's JSON layout cannot be kept " \
                         "(save it from Jupyter first)"
    applied: list[Diagnostic] = []
    for number, diags in per_cell.items():
        cell = notebook["cells"][number - 1]
        after, done = apply_fixes(_cell_text(cell), diags, unsafe=True)
        if done:
            cell["source"] = split_lines(after, keepends=True) \
                if isinstance(cell.get("source"), list) else after
            applied += done
    if not applied:
        return text, [], ""
    fixed = json.dumps(notebook, **layout[0]) + layout[1]
    if not verified(fixed, wanted, applied, recheck, python=False):
        return text, [], "fixes not applied: the fixed notebook did not check out " \
                         "(please report it)"
    return fixed, applied, ""


def _cell_text(cell: Any) -> str:
    source = cell.get("source", "") if isinstance(cell, dict) else ""
    if isinstance(source, list):
        return "".join(s for s in source if isinstance(s, str))
    return source if isinstance(source, str) else ""
