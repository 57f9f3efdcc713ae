"""Turn judged series into a Report: findings, rates, detection steps, verdict, charts."""

from __future__ import annotations

from statistics import median
from typing import Any

from torchleak.analysis.breakdown import assign_categories, breakdown_points
from torchleak.analysis.charts import all_signals, holder_growth, holder_signals
from torchleak.analysis.confirm import confirmation
from torchleak.analysis.holders import HolderFinding, holder_findings
from torchleak.analysis.live_calls import live_outcome
from torchleak.analysis.oom import memory_limit
from torchleak.analysis.rates import assign_rates
from torchleak.analysis.series import RunData
from torchleak.analysis.signals import (MIN_CENSUS_GROWTH, MIN_MEMORY_GROWTH, Judged,
                                        judge_signals, signal_findings)
from torchleak.analysis.thresholds import warmup_steps
from torchleak.analysis.trend import first_growing_step
from torchleak.report import Event, Finding, Mark, Report
from torchleak.units import number
from torchleak.vocab import Severity, Signal as S, Verdict

MIN_STEPS = 20  # fewer steps cannot separate warm-up from growth
_RUN_KEYS = ("name", "script", "argv", "status", "exit_code", "start_time", "end_time", "pid",
             "hostname", "python", "torch", "platform", "devices", "ram_total", "swap_total",
             "cgroup_limit", "gpu_totals", "budget_pct", "torchleak_version", "rank",
             "world_size", "cuda_snapshot")


def build_report(data: RunData, replay: bool = True, live: bool = False) -> Report:
    """``replay``: find each finding's detection step by replaying the online rule over
    prefixes of its series (off for the live detector, which records first firings).
    ``live``: mark each serious finding that is called, not only suspected (``confirm``)."""
    judged = judge_signals(data)
    holders = holder_findings(data, replay)
    named = [h.finding for h in holders]
    others = signal_findings(data, judged, named)
    assign_rates(data, judged, holders, others)
    if live:
        _confirm(data, judged, holders, others)
    if replay:
        for finding in others:
            finding.detected_at_step = _signal_detection(data, finding)
    findings = named + others
    for finding in findings:
        if finding.detected_at_step is None:
            finding.detected_at_step = data.steps
    findings.sort(key=lambda f: (Severity(f.severity).rank, -(f.bytes_per_step or 0)))
    report = Report(verdict=Verdict.NO_LEAK.value, steps=data.steps, findings=findings,
                    signals=all_signals(data, judged) + holder_signals(data, findings),
                    run=run_info(data.meta), holders=holder_growth(data),
                    marks=[Mark(s, n, v) for s, n, v in data.marks],
                    events=[Event(*e) for e in data.events], limit=_limit(data),
                    guard=guard_record(data.meta), safe=_safe(data.meta), overhead=overhead(data),
                    breakdown=breakdown_points(data))
    report.breakdown_rates = assign_categories(report.findings, data, report.breakdown)
    _decide(report, data)
    if not live:
        report.live = live_outcome(data, report)
    return report


def _confirm(data: RunData, judged: dict[str, Judged], holders: list[HolderFinding],
             others: list[Finding]) -> None:
    for holder in holders:
        if holder.finding.serious:
            holder.finding.called = confirmation(data, holder.finding, holder.steps,
                                                 holder.values, holder.onset, exact=True)
    for finding in others:
        j = judged.get(finding.signal)
        if finding.serious and j is not None:
            finding.called = confirmation(data, finding, j.series.x, j.series.y,
                                          j.trend.first_step, exact=False)


def _decide(report: Report, data: RunData) -> None:
    serious = report.serious
    if serious:
        report.verdict = Verdict.LEAK.value
        n = len(serious)
        report.reason = (f"{n} holder{'s' if n > 1 else ''} or signal{'s' if n > 1 else ''} "
                         f"grow{'' if n > 1 else 's'} without bound")
    elif data.steps < MIN_STEPS:
        report.verdict = Verdict.INCONCLUSIVE.value
        report.reason = (f"only {data.steps} training steps were recorded; at least "
                         f"{MIN_STEPS} are needed to tell warm-up from growth")
        if data.steps == 0:
            report.reason += (" (no optimizer.step() was seen: call torchleak.watch().step() "
                              "in loops without a torch.optim optimizer)")
    elif report.findings:
        # Small growth is reported (low severity), so "flat" would contradict it.
        report.reason = "nothing grows enough to be a leak after warm-up"
    else:
        report.reason = "memory and holders are flat after warm-up"


def _signal_detection(data: RunData, finding: Finding) -> int | None:
    """First step at which the online rule fires on the signal's data up to then."""
    series = data.memory.get(finding.signal) or data.census.get(finding.signal)
    if series is None:
        return None
    min_growth = MIN_MEMORY_GROWTH.get(finding.signal,  # type: ignore[call-overload]
                                       MIN_CENSUS_GROWTH.get(finding.signal, 0.0))
    return first_growing_step(series.x, series.y, min_growth=min_growth, exact=False,
                              warmup=warmup_steps)


def run_info(meta: dict[str, Any]) -> dict[str, Any]:
    return {k: meta[k] for k in _RUN_KEYS if k in meta}


def _limit(data: RunData) -> dict[str, Any]:
    found = memory_limit(data, S.MAIN_USS)
    return {"bytes": found[0], "name": found[1]} if found else {}


def _safe(meta: dict[str, Any]) -> list[dict[str, Any]]:
    """The settings --safe applied, with what the heap trimming gave back."""
    safe = meta.get("safe")
    if not isinstance(safe, list):
        return []
    trims = meta.get("safe_trims") if isinstance(meta.get("safe_trims"), dict) else {}
    found = []
    for s in safe:
        if not isinstance(s, dict) or not s.get("setting"):
            continue
        entry: dict[str, Any] = {"setting": str(s.get("setting")), "value": str(s.get("value")),
                                 "was": None if s.get("was") is None else str(s.get("was"))}
        if entry["setting"].startswith("malloc_trim") and number(trims.get("released")):
            entry["saved_bytes"] = int(trims["released"])
            entry["trims"] = int(number(trims.get("trims")) or 0)
        found.append(entry)
    return found


def guard_record(meta: dict[str, Any]) -> dict[str, Any] | None:
    """What the guard did, from the trace, with every field of the type views expect."""
    guard = meta.get("guard")
    if not isinstance(guard, dict) or guard.get("mode") not in ("warn", "checkpoint", "stop"):
        return None
    step = guard.get("step")
    actions = guard.get("actions")
    return {"mode": guard["mode"], "reason": str(guard.get("reason") or "limit"),
            "step": int(step) if isinstance(step, int) else None,
            "memory_bytes": number(guard.get("memory_bytes")),
            "limit_bytes": number(guard.get("limit_bytes")),
            "limit_name": str(guard.get("limit_name") or "limit"),
            "seconds_to_limit": number(guard.get("seconds_to_limit")),
            "actions": [str(a) for a in actions] if isinstance(actions, list) else []}


def overhead(data: RunData) -> dict[str, Any]:
    """torchleak's own cost, measured: its time at each boundary against a step's time
    (the median step, and the whole run), the expensive probes against the budget, and
    its own memory (see docs/detection.md, "torchleak's own cost")."""
    if not data.monitor_ms or not data.step_seconds:
        return {}
    ms = median(data.monitor_ms)
    step_ms = data.step_seconds * 1000.0
    costs: dict[str, Any] = {"ms_per_step": round(ms, 4), "share": round(ms / (step_ms + ms), 4),
                             "step_ms": round(step_ms, 3)}
    whole = data.monitor_ms_total + data.step_ms_total
    if whole > 0 and data.steps:
        costs["mean_ms_per_step"] = round(data.monitor_ms_total / data.steps, 4)
        costs["run_share"] = round(data.monitor_ms_total / whole, 4)
    costs.update(_probe_costs(data.meta))
    costs.update(_live_costs(data.meta))
    costs.update(_own_memory(data.meta))
    disabled = data.meta.get("probes_disabled")
    if isinstance(disabled, list) and disabled:
        costs["disabled"] = [str(d) for d in disabled]
    costs["over_budget"] = bool(
        costs["share"] > MAX_STEP_SHARE
        or costs.get("probe_share", 0) > BUDGET_SLACK * costs.get("budget", 1.0)
        or costs.get("live_share", 0) > BUDGET_SLACK * costs.get("live_cap", 1.0))
    return costs


MAX_STEP_SHARE = 0.05  # a boundary costing more than this share of a typical step is too much
BUDGET_SLACK = 1.5  # the scheduler checks the budget before a probe runs, not after


def _wall_seconds(meta: dict[str, Any]) -> float | None:
    """The recorded run's wall time (``start_time`` to ``end_time``), None when unknown."""
    start, end = number(meta.get("start_time")), number(meta.get("end_time"))
    return end - start if start is not None and end is not None and end > start else None


def _live_costs(meta: dict[str, Any]) -> dict[str, Any]:
    """The live detector's CPU and passes; the share of the run's wall time taken by the
    passes its cap holds (those deciding a live call are outside it), against the cap."""
    live = meta.get("live_detector")
    if not isinstance(live, dict) or number(live.get("seconds")) is None:
        return {}
    seconds = number(live.get("seconds")) or 0.0
    deciding = number(live.get("deciding_seconds")) or 0.0
    found: dict[str, Any] = {"live_seconds": round(seconds, 3),
                             "live_deciding_seconds": round(deciding, 3),
                             "live_passes": int(number(live.get("passes")) or 0)}
    # Over the wall time the cap counted against (the process's); older traces: the span.
    wall = number(live.get("wall_seconds")) or _wall_seconds(meta)
    if wall is not None:
        found["live_share"] = round(max(0.0, seconds - deciding) / wall, 4)
    if number(live.get("share")) is not None:
        found["live_cap"] = round(number(live.get("share")) or 0.0, 4)
    return found


def _probe_costs(meta: dict[str, Any]) -> dict[str, Any]:
    """The expensive probes' total, their share of the run's wall time, and their runs."""
    found: dict[str, Any] = {}
    probes = number(meta.get("monitor_seconds"))
    budget = number(meta.get("budget_pct"))
    if probes is not None:
        found["probe_seconds"] = round(probes, 3)
        # Over the wall time the budget counted against (the process's, as the live
        # detector's share); older traces: the recording's span.
        wall = number(meta.get("process_seconds")) or _wall_seconds(meta)
        fixed = number(meta.get("anchor_probe_seconds")) or 0.0
        if wall is not None:
            # The budget covers what the anchors leave (they are a fixed cost).
            found["probe_share"] = round(max(0.0, probes - fixed) / wall, 4)
            found["anchor_probe_seconds"] = round(fixed, 3)
    if budget is not None:
        found["budget"] = round(budget / 100.0, 4)
    runs = meta.get("probe_costs")
    if isinstance(runs, dict):
        found["probe_runs"] = {str(k): int(number(v.get("runs")) or 0) for k, v in runs.items()
                               if isinstance(v, dict)}
    return found


def _own_memory(meta: dict[str, Any]) -> dict[str, Any]:
    own = meta.get("own_memory")
    if not isinstance(own, dict):
        return {}
    found = {}
    for key, name in (("start_bytes", "memory_bytes"), ("census_scan_bytes",
                                                         "census_scan_bytes")):
        value = number(own.get(key))
        if value is not None:
            found[name] = int(value)
    return found
