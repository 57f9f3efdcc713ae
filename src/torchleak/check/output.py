"""Render diagnostics: ``full`` (code frames, ruff-like), ``concise``, ``json``, ``sarif``
(2.1.0), ``github``, ``gitlab`` (code quality) and ``junit``."""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Mapping, Sequence
from xml.etree import ElementTree

from torchleak.check.diagnostic import Diagnostic
from torchleak.check.frame import code_frame
from torchleak.check.rules import ALL_RULES, META_CODES

FORMATS = ("full", "concise", "json", "sarif", "github", "gitlab", "junit")
FORMAT_ALIASES = {"text": "concise"}  # the one-line format's earlier name
_NAMES = {r.code: r.name for r in ALL_RULES}


def render(diagnostics: Sequence[Diagnostic], fmt: str, fixed: int = 0,
           sources: Mapping[str, str] | None = None, unsafe_fixes: bool = False,
           color: bool = False, with_summary: bool = True) -> str:
    fmt = FORMAT_ALIASES.get(fmt, fmt)
    if fmt == "json":
        return json.dumps([_as_json(d) for d in diagnostics], indent=2, ensure_ascii=False)
    if fmt == "sarif":
        return json.dumps(_sarif(diagnostics), indent=2, ensure_ascii=False)
    if fmt == "github":
        return "\n".join(_github(d) for d in diagnostics)
    if fmt == "gitlab":
        return json.dumps(_gitlab(diagnostics), indent=2, ensure_ascii=False)
    if fmt == "junit":
        return _junit(diagnostics)
    lines = [_line(d, unsafe_fixes) for d in diagnostics]
    if fmt == "full":
        sources = sources or {}
        lines = [_with_frame(line, d, sources.get(d.path), unsafe_fixes, color)
                 for line, d in zip(lines, diagnostics)]
    if with_summary:
        lines.append(summary(diagnostics, fixed, unsafe_fixes))
    return "\n".join(lines)


def _line(d: Diagnostic, unsafe_fixes: bool) -> str:
    return f"{d.location}: {d.code}{' [*]' if _shows_fix(d, unsafe_fixes) else ''} {d.message}"


def _shows_fix(d: Diagnostic, unsafe_fixes: bool) -> bool:
    return d.fix is not None and (d.fix.safe or unsafe_fixes)


def _with_frame(line: str, d: Diagnostic, text: str | None, unsafe_fixes: bool,
                color: bool) -> str:
    frame = code_frame(d, text, color) if text is not None else ""
    help_line = f"  = help: {d.fix.message}" if d.fix and _shows_fix(d, unsafe_fixes) else ""
    return "\n".join(part for part in (line, frame, help_line) if part) + "\n"


def summary(diagnostics: Sequence[Diagnostic], fixed: int, unsafe_fixes: bool) -> str:
    if not diagnostics:
        if fixed:
            return f"Fixed {fixed} problem{'s' if fixed != 1 else ''}; all checks passed!"
        return "All checks passed!"
    noun = "problem" if len(diagnostics) == 1 else "problems"
    text = f"Found {len(diagnostics)} {noun}"
    if fixed:
        text += f" ({fixed} fixed, {len(diagnostics)} remaining)"
    text += "."
    fixable = sum(1 for d in diagnostics if _shows_fix(d, unsafe_fixes))
    hidden = sum(1 for d in diagnostics if d.fix and not _shows_fix(d, unsafe_fixes))
    if fixable or hidden:
        parts = []
        if fixable:
            parts.append(f"[*] {fixable} fixable with `torchleak check --fix"
                         f"{' --unsafe-fixes' if unsafe_fixes else ''}`")
        if hidden:
            parts.append(f"{hidden} more with `--unsafe-fixes` (they may change behaviour)")
        text += "\n" + "; ".join(parts) + "."
    return text


def statistics(diagnostics: Sequence[Diagnostic], unsafe_fixes: bool = False) -> str:
    """One line per code, most frequent first: count, code, fixable mark, name."""
    counts = Counter(d.code for d in diagnostics)
    fixable = {d.code for d in diagnostics if _shows_fix(d, unsafe_fixes)}
    width = len(str(max(counts.values()))) if counts else 1
    rows = [f"{n:>{width}}  {code}  {'[*]' if code in fixable else '[ ]'} "
            f"{_NAMES.get(code, 'checker')}"
            for code, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))]
    return "\n".join(rows)


def _as_json(d: Diagnostic) -> dict[str, object]:
    fix = None
    if d.fix:
        fix = {"message": d.fix.message, "applicability": d.fix.applicability,
               "edits": [{"content": e.text,
                          "location": {"row": e.line, "column": e.col},
                          "end_location": {"row": e.end_line, "column": e.end_col}}
                         for e in d.fix.edits]}
    return {
        "code": d.code, "name": _NAMES.get(d.code, "checker"), "message": d.message,
        "filename": d.path, "cell": d.cell,
        "location": {"row": d.line, "column": d.col},
        "end_location": {"row": d.end_line or d.line, "column": d.end_col or d.col},
        "fix": fix,
    }


def _level(code: str) -> str:
    if code.startswith(("TL0", "TL1")):
        return "error"
    return "note" if code.startswith("TL4") else "warning"


def _sarif(diagnostics: Sequence[Diagnostic]) -> dict[str, object]:
    from torchleak.check.ruledocs import rule_markdown

    rules = [{"id": r.code, "name": r.name, "shortDescription": {"text": r.summary},
              "help": {"text": r.summary, "markdown": rule_markdown(r)},
              "defaultConfiguration": {"level": _level(r.code), "enabled": r.default_on}}
             for r in ALL_RULES]
    rules += [{"id": code, "name": "checker", "shortDescription": {"text": text},
               "defaultConfiguration": {"level": "error"}} for code, text in META_CODES.items()]
    results = []
    for d in diagnostics:
        region = {"startLine": d.line, "startColumn": d.col,
                  "endLine": d.end_line or d.line, "endColumn": d.end_col or d.col}
        result: dict[str, object] = {
            "ruleId": d.code, "level": _level(d.code), "message": {"text": d.message},
            "locations": [{"physicalLocation": {"artifactLocation": {"uri": d.path},
                                                "region": region}}],
        }
        if d.cell is not None:
            result["properties"] = {"cell": d.cell}
        results.append(result)
    return {
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json", "version": "2.1.0",
        "runs": [{"tool": {"driver": {"name": "torchleak", "version": _version(),
                                      "rules": rules}}, "results": results}],
    }


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("torchleak")
    except PackageNotFoundError:
        return "0"


def _github(d: Diagnostic) -> str:
    def esc(text: str) -> str:
        return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")

    props = (f"title=torchleak ({d.code}),file={esc(d.path).replace(',', '%2C')},"
             f"line={d.line},col={d.col},endLine={d.end_line or d.line},"
             f"endColumn={d.end_col or d.col}")
    level = "error" if _level(d.code) == "error" else "warning"
    return f"::{level} {props}::{esc(d.location)}: {d.code} {esc(d.message)}"


def _gitlab(diagnostics: Sequence[Diagnostic]) -> list[dict[str, object]]:
    severity = {"error": "major", "warning": "minor", "note": "info"}
    out: list[dict[str, object]] = []
    seen: Counter[str] = Counter()
    for d in diagnostics:
        key = f"{d.path}\0{d.code}\0{d.message}"
        seen[key] += 1  # identical findings in one file stay distinct
        fingerprint = hashlib.sha256(f"{key}\0{seen[key]}".encode()).hexdigest()
        out.append({"description": f"{d.code} {d.message}", "check_name": d.code,
                    "fingerprint": fingerprint, "severity": severity[_level(d.code)],
                    "location": {"path": d.path, "lines": {"begin": d.line,
                                                           "end": d.end_line or d.line}}})
    return out


def _junit(diagnostics: Sequence[Diagnostic]) -> str:
    suites = ElementTree.Element("testsuites", name="torchleak", tests=str(len(diagnostics)),
                                 failures=str(len(diagnostics)), errors="0")
    by_path: dict[str, list[Diagnostic]] = {}
    for d in diagnostics:
        by_path.setdefault(d.path, []).append(d)
    if not diagnostics:
        suite = ElementTree.SubElement(suites, "testsuite", name="torchleak", tests="1",
                                       failures="0", errors="0")
        ElementTree.SubElement(suite, "testcase", name="torchleak", classname="torchleak")
    for path, found in by_path.items():
        suite = ElementTree.SubElement(suites, "testsuite", name=path, tests=str(len(found)),
                                       failures=str(len(found)), errors="0")
        for d in found:
            case = ElementTree.SubElement(suite, "testcase", name=f"torchleak.{d.code}",
                                          classname=path, line=str(d.line),
                                          column=str(d.col))
            failure = ElementTree.SubElement(case, "failure", message=d.message)
            failure.text = f"{d.location}: {d.code} {d.message}"
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + \
        ElementTree.tostring(suites, encoding="unicode")
