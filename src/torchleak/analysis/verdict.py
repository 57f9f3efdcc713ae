"""Turn judged series into a Report: findings, detection step, verdict."""

from __future__ import annotations

from torchleak.analysis.findings import (holder_findings, judge_signals, signal_findings,
                                         signal_summaries, warmup_steps, MIN_ITEMS_GROWTH,
                                         MIN_MEMORY_GROWTH, MIN_CENSUS_GROWTH, _metric)
from torchleak.analysis.series import RunData
from torchleak.analysis.trend import judge
from torchleak.report import Finding, Report

MIN_STEPS = 20  # fewer steps cannot separate warm-up from growth
_SEVERITY_ORDER = {"high": 0, "medium": 1, "low": 2}


def build_report(data: RunData, replay: bool = True) -> Report:
    """``replay``: find each finding's detection step by replaying the online rule over
    prefixes of its series (off for the live detector, which records first firings)."""
    memory = judge_signals(data)
    named = holder_findings(data, memory)
    findings = named + signal_findings(data, memory, named)
    for finding in findings:
        finding.detected_at_step = detection_step(data, finding) if replay else data.steps
    findings.sort(key=lambda f: (_SEVERITY_ORDER.get(f.severity, 3), -(f.bytes_per_step or 0)))
    serious = [f for f in findings if f.severity in ("high", "medium")]
    report = Report(verdict="no_leak", steps=data.steps, findings=findings,
                    signals=signal_summaries(memory), run=_run_info(data))
    if serious:
        report.verdict = "leak"
        report.reason = f"{len(serious)} growing holder(s) or signal(s)"
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


def detection_step(data: RunData, finding: Finding) -> int | None:
    """First step at which the online rule fires on the data recorded up to then.

    The rule is the same judge() the final analysis uses, applied to each prefix of the
    series the finding stands on (so it never uses the future)."""
    if finding.holder_path and finding.holder_path in data.holders:
        holder = data.holders[finding.holder_path]
        values, _, _ = _metric(holder)
        xs, min_growth, exact = holder.steps, float(MIN_ITEMS_GROWTH), True
    elif finding.signal in data.memory or finding.signal in data.census:
        series = data.memory.get(finding.signal) or data.census[finding.signal]
        xs, values = series.x, series.y
        min_growth = MIN_MEMORY_GROWTH.get(finding.signal, MIN_CENSUS_GROWTH.get(finding.signal, 0.0))
        exact = False
    else:
        return None
    # At most ~120 checkpoints: exact for short series, bounded cost for long runs.
    stride = max(1, len(xs) // 120)
    for end in range(5, len(xs) + stride, stride):
        end = min(end, len(xs))
        step = xs[end - 1]
        trend = judge(xs[:end], values[:end], warmup=warmup_steps(int(step)),
                      min_growth=min_growth, windows=20, exact=exact)
        if trend.growing:
            return int(step)
    return int(xs[-1]) if xs else None


def _run_info(data: RunData) -> dict[str, object]:
    keys = ("name", "script", "status", "exit_code", "start_time", "end_time", "pid")
    return {k: data.meta.get(k) for k in keys if k in data.meta}
