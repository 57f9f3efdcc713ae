"""The human summary printed on stderr at the end of ``torchleak run``."""

from __future__ import annotations

import sys
from pathlib import Path

from torchleak.report import Finding, Report

_MAX_FINDINGS = 3


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds / size:.1f} {unit}"
    return f"{seconds:.0f} s"


def _finding_lines(f: Finding) -> list[str]:
    lines = [f"  [{f.severity}] {f.culprit}"]
    if f.source:
        lines.append(f"      at {f.source}")
    if f.oom and f.oom.steps_to_oom is not None:
        lines.append(f"      OOM against {f.oom.limit_name} in ~{f.oom.steps_to_oom:,.0f} steps "
                     f"(~{_duration(f.oom.seconds_to_oom)})")
    lines.append(f"      fix: {f.fix}")
    if f.detected_at_step is not None:
        lines.append(f"      detected at step {f.detected_at_step}")
    return lines


def format_summary(report: Report, trace: Path) -> str:
    head = {"leak": "LEAK", "no_leak": "no leak", "inconclusive": "inconclusive"}[report.verdict]
    lines = [f"torchleak: {head} after {report.steps} steps - {report.reason}"]
    shown = [f for f in report.findings if f.severity != "low"]
    for finding in shown[:_MAX_FINDINGS]:
        lines.extend(_finding_lines(finding))
    if len(shown) > _MAX_FINDINGS:
        lines.append(f"  ... {len(shown) - _MAX_FINDINGS} more")
    minor = len(report.findings) - len(shown)
    if minor:
        # Small growth (a list of floats per epoch) is noted, not shouted about.
        names = ", ".join(f.holder_path or f.signal for f in report.findings
                          if f.severity == "low")[:120]
        lines.append(f"  {minor} small growing holder(s), low severity: {names}")
    lines.append(f"torchleak: trace {trace}  (torchleak report {trace.parent})")
    return "\n".join(lines)


def print_summary(report: Report, trace: Path) -> None:
    print(format_summary(report, trace), file=sys.stderr, flush=True)
