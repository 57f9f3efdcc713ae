"""What ``torchleak check`` does once its options are parsed: settings per file, the
check, fixes, and the report."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field

from torchleak.check.config import ConfigFinder
from torchleak.check.diagnostic import Diagnostic
from torchleak.check.files import excluded
from torchleak.check.output import render, statistics, summary
from torchleak.check.runner import FileResult, FileSettings, check_many, diff_of, write_fix
from torchleak.check.selection import Selection, parse_codes


@dataclass
class Options:
    paths: list[str]
    output_format: str | None = None
    select: list[str] | None = None
    extend_select: list[str] | None = None
    ignore: list[str] | None = None
    exclude: list[str] = field(default_factory=list)
    fix: bool = False
    unsafe_fixes: bool = False
    diff: bool = False
    statistics: bool = False
    config: str | None = None
    isolated: bool = False
    exit_zero: bool = False
    jobs: int | None = None
    stdin_filename: str = "-"
    quiet: bool = False
    color: bool = False


class Settings:
    """Each file's selection: the command line over its nearest configuration."""

    def __init__(self, o: Options) -> None:
        self.finder = ConfigFinder(o.config, o.isolated)
        self.select = parse_codes(o.select, "--select") if o.select else []
        self.ignore = parse_codes(o.ignore, "--ignore") if o.ignore else []
        self.extend = parse_codes(o.extend_select, "--extend-select") \
            if o.extend_select else []
        self._cache: dict[tuple[str | None, tuple[str, ...]], FileSettings] = {}

    def for_path(self, path: str) -> FileSettings:
        config = self.finder.for_path(path)
        key = (config.path, config.ignored_here(path))
        if key not in self._cache:
            selection = Selection.build(
                self.select or list(config.select) or None,
                list(config.ignore) + self.ignore,
                ([] if self.select else list(config.extend_select)) + self.extend)
            self._cache[key] = FileSettings(selection, key[1])
        return self._cache[key]

    def skip(self, path: str) -> bool:
        """The nearest configuration excludes this walked file or folder."""
        config = self.finder.for_path(path)
        return bool(config.exclude) and excluded(path, config.exclude)


def run(o: Options) -> int:
    settings = Settings(o)
    for path in o.paths:  # a broken configuration is an error before any work is done
        settings.for_path(path)
    if o.paths == ["-"]:
        return _run_stdin(o, settings.for_path(o.stdin_filename))
    fix_mode = ("unsafe" if o.unsafe_fixes else "safe") if (o.fix or o.diff) else None
    frames = (o.output_format or "full") == "full" and not o.statistics
    results = check_many(o.paths, settings.for_path, o.exclude, fix_mode, o.jobs,
                         settings.skip, keep_text=frames)
    diagnostics, sources, fixed, errors = _collect(results, o)
    for error in errors:
        print(f"torchleak check: {error}", file=sys.stderr)
    if o.diff:
        changes = sum(len(r.fixed) for r in results)
        print(f"Would fix {changes} problem{'s' if changes != 1 else ''}.", file=sys.stderr)
        return 0 if o.exit_zero or not changes else 1
    _report(diagnostics, sources, fixed, o)
    if errors and not o.exit_zero:
        return 2 if o.fix else 1
    return 0 if o.exit_zero or not diagnostics else 1


def _collect(results: list[FileResult], o: Options
             ) -> tuple[list[Diagnostic], dict[str, str], int, list[str]]:
    diagnostics: list[Diagnostic] = []
    sources: dict[str, str] = {}
    fixed, errors = 0, []
    for result in results:
        if result.fix_error and (o.fix or o.diff):
            errors.append(f"{result.path}: {result.fix_error}")
        remaining, text = result.diagnostics, result.text
        if o.diff and result.fixed_source is not None:
            sys.stdout.write(diff_of(result))
        if o.fix and result.fixed_source is not None:
            error = write_fix(result)
            if error is None:
                fixed += len(result.fixed)
                remaining, text = result.after_fix, result.fixed_source
            else:
                errors.append(error)
        diagnostics.extend(remaining)
        if text is not None and remaining:
            sources[result.path] = text
    return diagnostics, sources, fixed, errors


def _report(diagnostics: list[Diagnostic], sources: dict[str, str], fixed: int,
            o: Options) -> None:
    fmt = o.output_format or "full"
    if o.statistics:
        text = statistics(diagnostics, o.unsafe_fixes)
        if fmt in ("full", "concise", "text") and not o.quiet:
            text = "\n".join(x for x in (text, summary(diagnostics, fixed, o.unsafe_fixes))
                             if x)
    else:
        text = render(diagnostics, fmt, fixed, sources, o.unsafe_fixes, o.color,
                      with_summary=not o.quiet)
    if text:
        print(text)


def _run_stdin(o: Options, file_settings: FileSettings) -> int:
    from torchleak.check.engine import check_text, decode
    from torchleak.check.notebook import check_notebook

    name = o.stdin_filename
    text, error = decode(sys.stdin.buffer.read(), name)
    if text is None:
        diags = [error] if error else []
    elif name.endswith(".ipynb"):
        diags = check_notebook(text, name, file_settings.selection)
    else:
        diags = check_text(text, name, file_settings.selection)
    diags = [d for d in diags if file_settings.keep(d)]
    _report(diags, {name: text} if text is not None else {}, 0, o)
    return 0 if o.exit_zero or not diags else 1
