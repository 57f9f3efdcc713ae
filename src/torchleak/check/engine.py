"""Run the rules over one source text: parse once, index once, then every rule."""

from __future__ import annotations

import ast
import warnings
from collections.abc import Iterable

from torchleak.check.context import build_index
from torchleak.check.diagnostic import Diagnostic
from torchleak.check.noqa import suppressed
from torchleak.check.rules import ALL_RULES, Analysis, Rule
from torchleak.check.selection import Selection
from torchleak.check.source import SourceText, split_lines

MAX_BYTES = 20 * 1024 * 1024  # bigger files are generated data, not training code


def active_rules(selection: Selection) -> list[Rule]:
    return [r for r in ALL_RULES if selection.enabled(r.code)]


def meta(path: str, code: str, message: str, line: int = 1, col: int = 1) -> Diagnostic:
    return Diagnostic(path, max(line, 1), max(col, 1), code, message, source_line=line)


def decode(data: bytes, path: str) -> tuple[str | None, Diagnostic | None]:
    """Bytes -> text honouring PEP 263 coding cookies; a TL001 diagnostic on failure."""
    source, error = decode_source(data, path)
    return (source.text if source else None), error


def decode_source(data: bytes, path: str) -> tuple[SourceText | None, Diagnostic | None]:
    """Like ``decode``, keeping the encoding (and BOM) to write the file back."""
    if len(data) > MAX_BYTES:
        return None, meta(path, "TL001", f"file is {len(data) // 1048576} MiB, larger than "
                                         f"the {MAX_BYTES // 1048576} MiB limit; skipped")
    try:
        return SourceText.decode(data), None
    except (SyntaxError, LookupError, UnicodeDecodeError) as err:
        where = getattr(err, "start", None)
        detail = f" at byte {where}" if where is not None else ""
        return None, meta(path, "TL001", f"cannot decode the file{detail}: "
                                         f"{_one_line(err)}; save it as UTF-8")


def parse(source: str, path: str) -> tuple[ast.Module | None, Diagnostic | None]:
    try:
        with warnings.catch_warnings():
            # ``"\d"`` and friends: the user's Python prints those, not the checker
            warnings.simplefilter("ignore", SyntaxWarning)
            warnings.simplefilter("ignore", DeprecationWarning)
            return ast.parse(source, filename=path), None
    except SyntaxError as err:
        msg = err.msg or "invalid syntax"
        return None, meta(path, "TL002", f"syntax error, file not checked: {msg}",
                          err.lineno or 1, err.offset or 1)
    except (ValueError, RecursionError, MemoryError, OverflowError) as err:
        return None, meta(path, "TL002", f"cannot parse the file, not checked: "
                                         f"{_one_line(err)}")


def run_rules(tree: ast.Module, source: str, path: str,
              rules: Iterable[Rule]) -> list[Diagnostic]:
    """All findings of ``rules`` on a parsed module, noqa applied, sorted."""
    lines = split_lines(source)
    try:
        analysis = Analysis(path, lines, build_index(tree))
    except RecursionError:
        return [meta(path, "TL002", "code is nested too deeply to analyse; not checked")]
    out: list[Diagnostic] = []
    for rule in rules:
        try:
            for f in rule.check(analysis):
                line = getattr(f.node, "lineno", 1)
                col = analysis.char_col(line, getattr(f.node, "col_offset", 0)) + 1
                end = getattr(f.node, "end_lineno", None) or line
                end_col = analysis.char_col(end, getattr(f.node, "end_col_offset", 0) or 0) + 1
                out.append(Diagnostic(path, line, col, rule.code, f.message, f.fix, end,
                                      end_col, source_line=line))
        except Exception as err:  # noqa: BLE001 - one broken rule must not stop the others
            out.append(meta(path, "TL000", f"rule {rule.code} failed on this file "
                                           f"({type(err).__name__}: {_one_line(err)}); "
                                           f"please report it"))
    kept = [d for d in out if not _noqa(lines, d)]
    return sorted(set(kept), key=Diagnostic.sort_key)


def check_text(source: str, path: str, selection: Selection) -> list[Diagnostic]:
    tree, error = parse(source, path)
    if error is not None:
        return [error] if selection.enabled(error.code) else []
    assert tree is not None
    diags = run_rules(tree, source, path, active_rules(selection))
    return [d for d in diags if selection.enabled(d.code)]


def _noqa(lines: list[str], d: Diagnostic) -> bool:
    line = d.source_line or d.line
    return 1 <= line <= len(lines) and suppressed(lines[line - 1], d.code)


def _one_line(err: BaseException) -> str:
    return " ".join(str(err).split())[:200] or type(err).__name__
