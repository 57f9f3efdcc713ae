"""The end-of-run summary printed on stderr after ``torchleak run`` (and ``monitor()``)."""

from __future__ import annotations

from pathlib import Path

from torchleak.analysis.breakdown import GROWS
from torchleak.analysis.signals import BORDERLINE
from torchleak.report import Finding, Report
from torchleak.units import format_bytes
from torchleak.vocab import verdict_words
from torchleak.views.inert import inert_input
from torchleak.views.renderers.details import (guard_text, live_text, oom_text, overhead_text,
                                               pattern_text, rate_text)

_MAX_FINDINGS = 3
_MAX_RANKS = 8  # leaking ranks named one per line in the end-of-run summary


def _head(verdict: str) -> str:
    """The verdict in words, a leak in capitals: the line a reader must not miss."""
    return "LEAK" if verdict == "leak" else verdict_words(verdict)


@inert_input
def finding_lines(f: Finding, indent: str = "  ") -> list[str]:
    more = indent + "    "
    lines = [f"{indent}[{f.severity}] {f.culprit}", f"{more}rate {rate_text(f)}"]
    if f.source:
        lines.append(f"{more}at {f.source}")
    grows = next((e for e in f.evidence if e.startswith(GROWS)), None)
    if grows:
        window, _, body = grows[len(GROWS):].strip().partition(": ")
        if not window.startswith("steps "):  # no span given: all of it is the body
            window, body = "", grows[len(GROWS):].strip()
        lines.append(f"{more}where it grows{f' ({window})' if window else ''}: {body}")
    if f.oom is not None and f.oom.steps_to_oom is not None:
        lines.append(f"{more}OOM: {oom_text(f.oom)}")
    lines.append(f"{more}fix: {f.fix}")
    pattern = pattern_text(f)
    if pattern:
        lines.append(f"{more}see {pattern}")
    if f.detected_at_step is not None:
        lines.append(f"{more}growth visible from step {f.detected_at_step:,}")
    if f.margin is not None and f.margin < BORDERLINE:
        lines.append(f"{more}borderline: the growth is {f.margin:.2g}x what a leak needs; "
                     "a longer run decides")
    return lines


@inert_input
def format_summary(report: Report, trace: Path | None) -> str:
    head = _head(report.verdict)
    lines = [f"torchleak: {head} after {report.steps:,} steps - {report.reason}"]
    guard = guard_text(report.guard)
    if guard:
        lines.append(f"  {guard}")
    lines += [f"  {line}" for line in live_text(report)]
    for line in report.ranks[:_MAX_RANKS]:  # a job's leaking ranks; the flat are counted
        top = f": {line['top_finding']}" if line.get("top_finding") else ""
        lines.append(f"  rank {line['rank']}: {_head(line['verdict'])}"
                     f" after {line['steps']:,} steps{top}")
    if len(report.ranks) > _MAX_RANKS:
        lines.append(f"  ... and {len(report.ranks) - _MAX_RANKS} more leaking ranks in the report")
    shown = report.serious
    for finding in shown[:_MAX_FINDINGS]:
        lines.extend(finding_lines(finding))
    if len(shown) > _MAX_FINDINGS:
        lines.append(f"  ... and {len(shown) - _MAX_FINDINGS} more in the report")
    minor = [f for f in report.findings if not f.serious]
    if minor:
        # Small growth (a list of floats per epoch) is noted, not shouted about.
        names = ", ".join(f.holder_path or f.signal for f in minor)
        lines.append(f"  {len(minor)} small growing holder(s), low severity: {names}")
    for change in report.safe:
        if change.get("saved_bytes"):
            lines.append(f"torchleak --safe: {change['setting']} gave back "
                         f"{format_bytes(change['saved_bytes'])} in {change.get('trims')} trims")
    if report.overhead:
        lines.append(f"torchleak: its own cost {overhead_text(report.overhead)}")
    if trace is not None and report.job:
        run = trace.parent.parent  # rank<N>/trace.sqlite in the run folder
        lines.append(f"torchleak: traces of {report.job.get('ranks')} ranks in {run}  "
                     f"(torchleak report {run})")
    elif trace is not None:
        lines.append(f"torchleak: trace {trace}  (torchleak report {trace.parent})")
    return "\n".join(lines)
