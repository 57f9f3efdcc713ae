"""Check ``.ipynb`` notebooks: all code cells as one module, findings mapped to cells."""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace

from torchleak.check.diagnostic import Diagnostic, Edit, Fix
from torchleak.check.engine import active_rules, meta, parse, run_rules
from torchleak.check.selection import Selection
from torchleak.check.source import split_lines

_CELL_MAGICS_WITH_PYTHON = ("%%time", "%%timeit", "%%capture", "%%prun")


@dataclass
class Cell:
    number: int  # 1-based position among all cells of the notebook
    lines: list[str]  # as analysed: IPython magics replaced
    original: list[str] = field(default_factory=list)  # as written


def code_cells(text: str, path: str) -> tuple[list[Cell], Diagnostic | None]:
    try:
        nb = json.loads(text)
        cells = nb["cells"] if isinstance(nb, dict) else None
        if not isinstance(cells, list):
            raise ValueError("no 'cells' list")
    except (ValueError, KeyError, TypeError, RecursionError) as err:
        return [], meta(path, "TL003", f"not a valid notebook ({str(err)[:120]}); skipped")
    out: list[Cell] = []
    for number, cell in enumerate(cells, start=1):
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        source = cell.get("source", "")
        if isinstance(source, list):
            source = "".join(s for s in source if isinstance(s, str))
        if not isinstance(source, str):
            continue
        lines = split_lines(source)
        out.append(Cell(number, [_demagic(line) for line in lines], lines))
    return out, None


def _demagic(line: str) -> str:
    """IPython syntax becomes ``pass`` so line numbers and indentation survive."""
    stripped = line.lstrip()
    indent = line[: len(line) - len(stripped)]
    if stripped.startswith(("%", "!")) or (stripped.endswith("?") and "#" not in stripped):
        if stripped.startswith(_CELL_MAGICS_WITH_PYTHON):
            return ""
        return f"{indent}pass"
    return line


@dataclass
class Combined:
    """All code cells as one module, and where each of its lines came from."""

    source: str
    origin: list[tuple[int, int]]  # combined line -> (cell number, line in cell)
    errors: list[Diagnostic]  # cells that do not parse on their own
    cells: dict[int, Cell] = field(default_factory=dict)

    def shown(self, d: Diagnostic) -> Diagnostic:
        """The diagnostic in notebook coordinates (cell, line in cell), its fix too; a fix
        that spans cells, edits another cell than the finding's (they are applied to the
        finding's cell) or touches a rewritten magic line is dropped."""
        origin = self.origin
        cell, line = origin[d.line - 1] if 0 < d.line <= len(origin) else (None, d.line)
        end = origin[d.end_line - 1][1] if 0 < d.end_line <= len(origin) else line
        return replace(d, line=line, cell=cell, end_line=end, fix=self._fix_in_cell(d.fix, cell))

    def _fix_in_cell(self, fix: Fix | None, own: int | None) -> Fix | None:
        if fix is None:
            return None
        edits: list[Edit] = []
        cells = set()
        for e in fix.edits:
            if not (0 < e.line <= len(self.origin) and 0 < e.end_line <= len(self.origin)):
                return None
            (cell, start), (cell_end, end) = self.origin[e.line - 1], self.origin[e.end_line - 1]
            source = self.cells[cell]
            if cell != cell_end or any(source.lines[i - 1] != source.original[i - 1]
                                       for i in range(start, end + 1)):
                return None
            cells.add(cell)
            edits.append(Edit(start, e.col, end, e.end_col, e.text))
        return Fix(fix.message, tuple(edits), fix.applicability) if cells == {own} else None


def combine(cells: list[Cell], path: str) -> Combined:
    combined: list[str] = []
    origin: list[tuple[int, int]] = []
    errors: list[Diagnostic] = []
    for cell in cells:
        if cell.lines and cell.lines[0].lstrip().startswith("%%"):
            continue  # a cell magic in another language (%%bash, %%html)
        _, err = parse("\n".join(cell.lines) + "\n", path)
        if err is not None:
            errors.append(replace(err, cell=cell.number))
            continue
        for i, line in enumerate(cell.lines, start=1):
            combined.append(line)
            origin.append((cell.number, i))
    return Combined("\n".join(combined) + "\n", origin, errors,
                    {cell.number: cell for cell in cells})


def _combined_diagnostics(text: str, path: str,
                          selection: Selection) -> tuple[list[Diagnostic], Combined | None]:
    cells, error = code_cells(text, path)
    if error is not None:
        return [error], None
    combined = combine(cells, path)
    tree, _ = parse(combined.source, path)
    found = [] if tree is None else run_rules(tree, combined.source, path,
                                              active_rules(selection))
    return found, combined


def check_notebook(text: str, path: str, selection: Selection) -> list[Diagnostic]:
    found, combined = _combined_diagnostics(text, path, selection)
    if combined is None:
        return found
    diags = list(combined.errors) + [combined.shown(d) for d in found]
    return [d for d in diags if selection.enabled(d.code)]
