"""Check many files: discovery, reading, notebooks, fixes, and a process pool when the
tree is big enough for it to pay off."""

from __future__ import annotations

import os
from collections.abc import Iterable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field

from torchleak.check.diagnostic import Diagnostic
from torchleak.check.engine import check_text, decode, meta
from torchleak.check.files import Candidate, discover, read_bytes
from torchleak.check.fixes import apply_fixes, unified_diff
from torchleak.check.notebook import check_notebook
from torchleak.check.selection import Selection

_POOL_MIN_FILES = 48


@dataclass
class FileResult:
    path: str
    diagnostics: list[Diagnostic]
    lines: int = 0
    source: str | None = None
    fixed_source: str | None = None
    fixed: list[Diagnostic] = field(default_factory=list)


def check_file(candidate: Candidate, selection: Selection, want_fixes: bool) -> FileResult:
    path = candidate.path
    if candidate.error:
        return FileResult(path, [meta(path, "TL001", f"cannot read: {candidate.error}")])
    data, reason = read_bytes(path)
    if data is None:
        return FileResult(path, [meta(path, "TL001", f"cannot read: {reason}")])
    text, error = decode(data, path)
    if text is None:
        return FileResult(path, [error] if error else [])
    lines = text.count("\n") + 1
    try:
        if path.endswith(".ipynb"):
            return FileResult(path, check_notebook(text, path, selection), lines)
        diags = check_text(text, path, selection)
    except RecursionError:
        return FileResult(path, [meta(path, "TL002", "too deeply nested to analyse")], lines)
    result = FileResult(path, diags, lines)
    if want_fixes and any(d.fix for d in diags):
        fixed_source, applied = apply_fixes(text, diags)
        if applied:
            result.source, result.fixed_source, result.fixed = text, fixed_source, applied
    return result


def _check_chunk(args: tuple[list[Candidate], Selection, bool]) -> list[FileResult]:
    chunk, selection, want_fixes = args
    return [check_file(c, selection, want_fixes) for c in chunk]


def check_many(paths: Iterable[str], selection: Selection, exclude: Iterable[str] = (),
               want_fixes: bool = False, jobs: int | None = None) -> list[FileResult]:
    candidates = list(discover(paths, exclude))
    workers = jobs if jobs is not None else min(os.cpu_count() or 1, 8)
    if workers <= 1 or len(candidates) < _POOL_MIN_FILES:
        return [check_file(c, selection, want_fixes) for c in candidates]
    size = max(8, len(candidates) // (workers * 4))
    chunks = [(candidates[i:i + size], selection, want_fixes)
              for i in range(0, len(candidates), size)]
    try:
        with ProcessPoolExecutor(max_workers=workers) as pool:
            return [r for rs in pool.map(_check_chunk, chunks) for r in rs]
    except (OSError, RuntimeError):  # no fork/semaphores here: do it in this process
        return [check_file(c, selection, want_fixes) for c in candidates]


def write_fix(result: FileResult) -> str | None:
    """Write the fixed file; returns an error message instead of raising."""
    if result.fixed_source is None:
        return None
    try:
        with open(result.path, "w", encoding="utf-8", newline="") as fh:
            fh.write(result.fixed_source)
    except OSError as err:
        return f"{result.path}: cannot write the fix: {err.strerror or err}"
    return None


def diff_of(result: FileResult) -> str:
    if result.fixed_source is None or result.source is None:
        return ""
    return unified_diff(result.path, result.source, result.fixed_source)
