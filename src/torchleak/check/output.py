"""Render diagnostics: ``text`` (ruff-like), ``json``, ``sarif`` (2.1.0), ``github``."""

from __future__ import annotations

import json
from collections.abc import Sequence

from torchleak.check.diagnostic import Diagnostic
from torchleak.check.rules import ALL_RULES, META_CODES

FORMATS = ("text", "json", "sarif", "github")
DOCS_URL = "https://github.com/torchleak/torchleak/blob/main/docs/check-rules.md"


def render(diagnostics: Sequence[Diagnostic], fmt: str, fixed: int = 0) -> str:
    if fmt == "json":
        return json.dumps([_as_json(d) for d in diagnostics], indent=2, ensure_ascii=False)
    if fmt == "sarif":
        return json.dumps(_sarif(diagnostics), indent=2, ensure_ascii=False)
    if fmt == "github":
        return "\n".join(_github(d) for d in diagnostics)
    return _text(diagnostics, fixed)


def _text(diagnostics: Sequence[Diagnostic], fixed: int) -> str:
    out = [f"{d.location}: {d.code}{' [*]' if d.fix else ''} {d.message}"
           for d in diagnostics]
    fixable = sum(1 for d in diagnostics if d.fix)
    if diagnostics:
        noun = "problem" if len(diagnostics) == 1 else "problems"
        summary = f"Found {len(diagnostics)} {noun}"
        if fixed:
            summary += f" ({fixed} fixed)"
        if fixable:
            summary += f".\n[*] {fixable} fixable with `torchleak check --fix`"
        out.append(summary + ("" if fixable else "."))
    elif fixed:
        out.append(f"Fixed {fixed} problem{'s' if fixed != 1 else ''}; all checks passed!")
    else:
        out.append("All checks passed!")
    return "\n".join(out)


def _as_json(d: Diagnostic) -> dict[str, object]:
    fix = None
    if d.fix:
        fix = {"message": d.fix.message, "applicability": "safe",
               "edits": [{"content": e.text,
                          "location": {"row": e.line, "column": e.col},
                          "end_location": {"row": e.end_line, "column": e.end_col}}
                         for e in d.fix.edits]}
    return {
        "code": d.code, "message": d.message, "filename": d.path, "cell": d.cell,
        "location": {"row": d.line, "column": d.col},
        "end_location": {"row": d.end_line or d.line, "column": d.end_col or d.col},
        "fix": fix, "url": f"{DOCS_URL}#{d.code.lower()}",
    }


def _level(code: str) -> str:
    if code.startswith(("TL0", "TL1")):
        return "error"
    return "note" if code.startswith("TL4") else "warning"


def _sarif(diagnostics: Sequence[Diagnostic]) -> dict[str, object]:
    rules = [{"id": r.code, "name": r.name, "shortDescription": {"text": r.summary},
              "helpUri": f"{DOCS_URL}#{r.code.lower()}",
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
        "runs": [{"tool": {"driver": {"name": "torchleak", "informationUri": DOCS_URL,
                                      "rules": rules}}, "results": results}],
    }


def _github(d: Diagnostic) -> str:
    def esc(text: str) -> str:
        return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")

    props = (f"title=torchleak ({d.code}),file={esc(d.path).replace(',', '%2C')},"
             f"line={d.line},col={d.col},endLine={d.end_line or d.line},"
             f"endColumn={d.end_col or d.col}")
    level = "error" if _level(d.code) == "error" else "warning"
    return f"::{level} {props}::{esc(d.location)}: {d.code} {esc(d.message)}"
