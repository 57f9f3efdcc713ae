"""Turn judged series into a Report: findings, detection step, verdict."""

from __future__ import annotations

from torchleak.analysis.findings import (MIN_CENSUS_GROWTH, MIN_MEMORY_GROWTH, judge_signals,
                                         signal_findings, signal_summaries)
from torchleak.analysis.holders import holder_findings
from torchleak.analysis.series import RunData
from torchleak.analysis.trend import first_growing_step
from torchleak.analysis.units import warmup_steps
from torchleak.report import Finding, Report

MIN_STEPS = 20  # fewer steps cannot separate warm-up from growth
_SEVERITY_ORDER = {"high": 0, "medium": 1, "low": 2}


def build_report(data: RunData, replay: bool = True) -> Report:
    """``replay``: find each finding's detection step by replaying the online rule over
    prefixes of its series (off for the live detector, which records first firings)."""
    memory = judge_signals(data)
    main = memory.get("main_uss")
    main_slope = main[1].slope if main and main[1].growing else 0.0
    named = holder_findings(data, main_slope, replay)
    signals = signal_findings(data, memory, named)
    if replay:
        for finding in signals:
            finding.detected_at_step = _signal_detection(data, finding)
    findings = named + signals
    for finding in findings:
        if finding.detected_at_step is None:
            finding.detected_at_step = data.steps
    findings.sort(key=lambda f: (_SEVERITY_ORDER.get(f.severity, 3), -(f.bytes_per_step or 0)))
    serious = [f for f in findings if f.severity in ("high", "medium")]
    report = Report(verdict="no_leak", steps=data.steps, findings=findings,
                    signals=signal_summaries(memory), run=_run_info(data))
    if serious:
        report.verdict = "leak"
        n = len(serious)
        report.reason = (f"{n} holder{'s' if n > 1 else ''} or signal{'s' if n > 1 else ''} "
                         f"grow{'' if n > 1 else 's'} without bound")
    elif data.steps < MIN_STEPS:
        report.verdict = "inconclusive"
        report.reason = (f"only {data.steps} training steps were recorded; at least {MIN_STEPS} "
                         "are needed to tell warm-up from growth")
        if data.steps == 0:
            report.reason += (" (no optimizer.step() was seen: call torchleak.watch().step() "
                              "in loops without a torch.optim optimizer)")
    else:
        report.reason = "memory and holders are flat after warm-up"
    return report


def _signal_detection(data: RunData, finding: Finding) -> int | None:
    """First step at which the online rule fires on the signal's data up to then."""
    series = data.memory.get(finding.signal) or data.census.get(finding.signal)
    if series is None:
        return None
    min_growth = MIN_MEMORY_GROWTH.get(finding.signal, MIN_CENSUS_GROWTH.get(finding.signal, 0.0))
    return first_growing_step(series.x, series.y, min_growth=min_growth, exact=False,
                              warmup=warmup_steps)


def _run_info(data: RunData) -> dict[str, object]:
    keys = ("name", "script", "status", "exit_code", "start_time", "end_time", "pid")
    return {k: data.meta.get(k) for k in keys if k in data.meta}
