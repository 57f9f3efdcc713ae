"""Check many files: discovery, reading, notebooks, fixes, and a process pool when the
tree is big enough for it to pay off."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field

from torchleak.check.diagnostic import Diagnostic
from torchleak.check.engine import check_text, decode_source, meta
from torchleak.check.files import Candidate, discover, read_bytes
from torchleak.check.fixes import apply_fixes, unified_diff, verified
from torchleak.check.notebook import check_notebook
from torchleak.check.notebook_fix import fix_cells
from torchleak.check.selection import Selection
from torchleak.check.writer import write_bytes

_POOL_MIN_FILES = 48


@dataclass(frozen=True)
class FileSettings:
    """How one file is checked: its selection and the codes its ``per-file-ignores``
    switch off."""

    selection: Selection = Selection()
    ignored: tuple[str, ...] = ()

    def keep(self, d: Diagnostic) -> bool:
        return not any(p == "ALL" or d.code.startswith(p) for p in self.ignored)


@dataclass
class FileResult:
    path: str
    diagnostics: list[Diagnostic]
    lines: int = 0
    source: str | None = None
    fixed_source: str | None = None
    fixed: list[Diagnostic] = field(default_factory=list)
    data: bytes | None = None  # the bytes read, to detect a change before writing
    fixed_data: bytes | None = None
    fix_error: str = ""
    text: str | None = None  # kept when there are findings, for code frames
    after_fix: list[Diagnostic] = field(default_factory=list)  # findings left in the fix


def check_file(candidate: Candidate, settings: FileSettings,
               fix_mode: str | None = None, keep_text: bool = False) -> FileResult:
    """``fix_mode``: ``None`` (report only), ``"safe"`` or ``"unsafe"`` (compute fixes);
    ``keep_text``: keep the text of files with findings (for code frames)."""
    path = candidate.path
    if candidate.error:
        return FileResult(path, [meta(path, "TL001", f"cannot read: {candidate.error}")])
    data, reason = read_bytes(path)
    if data is None:
        return FileResult(path, [meta(path, "TL001", f"cannot read: {reason}")])
    source, error = decode_source(data, path)
    if source is None:
        return FileResult(path, [error] if error else [])
    text = source.text
    notebook = path.endswith(".ipynb")
    try:
        diags = check_notebook(text, path, settings.selection) if notebook \
            else check_text(text, path, settings.selection)
    except RecursionError:
        return FileResult(path, [meta(path, "TL002", "too deeply nested to analyse")])
    result = FileResult(path, [d for d in diags if settings.keep(d)], text.count("\n") + 1,
                        data=data if fix_mode is not None else None)
    if result.diagnostics and keep_text:
        result.text = text
    if fix_mode is not None and any(d.fix for d in result.diagnostics):
        _fix(result, text, settings, fix_mode == "unsafe", notebook)
        if result.fixed_source is not None:
            try:
                result.fixed_data = source.encode(result.fixed_source)
            except UnicodeEncodeError:
                result.fixed_source, result.fixed = None, []
                result.fix_error = f"the fix cannot be written in the file's {source.encoding}"
    return result


def _fix(result: FileResult, text: str, settings: FileSettings, unsafe: bool,
         notebook: bool) -> None:
    wanted = result.diagnostics
    if notebook:
        fixed, applied, error = fix_cells(text, wanted, unsafe,
                                          lambda new: _recheck(new, result.path, settings))
        result.fix_error = error
    else:
        fixed, applied = apply_fixes(text, wanted, unsafe)
        if applied and not verified(fixed, wanted, applied,
                                    lambda new: _recheck(new, result.path, settings)):
            fixed, applied = text, []
            result.fix_error = "fixes not applied: the fixed file did not check out " \
                               "(please report it)"
    if applied:
        result.source, result.fixed_source, result.fixed = text, fixed, applied
        result.after_fix = _recheck(fixed, result.path, settings)


def _recheck(text: str, path: str, settings: FileSettings) -> list[Diagnostic]:
    found = check_notebook(text, path, settings.selection) if path.endswith(".ipynb") \
        else check_text(text, path, settings.selection)
    return [d for d in found if settings.keep(d)]


def _check_chunk(args: tuple[list[tuple[Candidate, FileSettings]], str | None, bool]
                 ) -> list[FileResult]:
    chunk, fix_mode, keep_text = args
    return [check_file(c, s, fix_mode, keep_text) for c, s in chunk]


def check_many(paths: Iterable[str],
               settings: FileSettings | Selection | Callable[[str], FileSettings],
               exclude: Iterable[str] = (), fix_mode: str | None = None,
               jobs: int | None = None, skip: Callable[[str], bool] | None = None,
               keep_text: bool = False) -> list[FileResult]:
    """``settings``: one for all files or one per path; ``skip``: further exclusions for
    files found by walking folders (the nearest configuration's ``exclude``)."""
    settings_for = _settings_function(settings)
    candidates = [(c, settings_for(c.path)) for c in discover(paths, exclude, skip)]
    workers = jobs if jobs is not None else min(os.cpu_count() or 1, 8)
    if workers <= 1 or len(candidates) < _POOL_MIN_FILES:
        return [check_file(c, s, fix_mode, keep_text) for c, s in candidates]
    size = max(8, len(candidates) // (workers * 4))
    chunks = [(candidates[i:i + size], fix_mode, keep_text)
              for i in range(0, len(candidates), size)]
    try:
        with ProcessPoolExecutor(max_workers=workers) as pool:
            return [r for rs in pool.map(_check_chunk, chunks) for r in rs]
    except (OSError, RuntimeError):  # no fork/semaphores here: do it in this process
        return [check_file(c, s, fix_mode, keep_text) for c, s in candidates]


def _settings_function(settings: FileSettings | Selection | Callable[[str], FileSettings]
                       ) -> Callable[[str], FileSettings]:
    if isinstance(settings, Selection):
        fixed = FileSettings(settings)
        return lambda _path: fixed
    if isinstance(settings, FileSettings):
        return lambda _path: settings  # type: ignore[return-value]
    return settings


def write_fix(result: FileResult) -> str | None:
    """Write the fixed file; returns an error message instead of raising."""
    if result.fixed_data is None or result.data is None:
        return None
    return write_bytes(result.path, result.data, result.fixed_data)


def without_fixed(result: FileResult) -> list[Diagnostic]:
    applied = set(result.fixed)
    return [d for d in result.diagnostics if d not in applied]


def diff_of(result: FileResult) -> str:
    if result.fixed_source is None or result.source is None:
        return ""
    return unified_diff(result.path, result.source, result.fixed_source)

