"""The words every screen uses for the same facts, so two screens never disagree: the
verdict line, a finding's rate, size, OOM projection and pattern, and the run's metadata.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from torchleak.patterns import DOC_PAGE
from torchleak.report import Finding, OomProjection, Report, Signal
from torchleak.units import (format_bytes, format_count, format_duration, format_rate,
                             format_time, format_value)

VERDICT_TITLES = {
    "leak": "Memory leak",
    "no_leak": "No leak found",
    "inconclusive": "Inconclusive",
}
SIGNAL_NAMES = {"main_uss": "main process USS", "workers_uss": "workers' USS (summed)",
                "cuda_allocated": "CUDA allocated", "cuda_reserved_unused":
                "CUDA reserved, unallocated", "tensors": "live tensors",
                "graph_nodes": "autograd nodes"}


def status_of(report: Report) -> str:
    return str(report.run.get("status") or "unknown")


def verdict_parts(report: Report) -> tuple[str, str]:
    """The banner's title and its one-sentence explanation."""
    title = VERDICT_TITLES.get(report.verdict, report.verdict)
    serious = len(report.serious)
    minor = len(report.findings) - serious
    if report.verdict == "leak":
        title += f": {serious} finding{'s' if serious != 1 else ''}"
        if minor:
            title += f" (+{minor} minor)"
    reason = report.reason
    status = status_of(report)
    if status == "killed":  # even when judged live: the run is over
        reason = f"The run was killed at step {report.steps:,}. {reason}".strip()
    elif report.source == "live" or status == "running":
        reason = f"Run in progress: as of step {report.steps:,}. {reason}".strip()
    elif status == "stopped":
        reason = f"The guard stopped the run at step {report.steps:,}. {reason}".strip()
    return title, reason


MAX_RANK_ROWS = 20  # leaking ranks drawn one row each; the rest are named in one line


def rank_rows(report: Report) -> list[dict[str, str]]:
    """One row per leaking rank of a job: its growth, top finding and whence its verdict."""
    rows = []
    for line in report.ranks[:MAX_RANK_ROWS]:
        rate = line.get("bytes_per_step") or line.get("main_uss_slope") or 0.0
        growth = (f"{format_bytes(rate, signed=True)}/step" if line.get("verdict") == "leak"
                  and isinstance(rate, (int, float)) and rate else "flat")
        source = str(line.get("source") or "-")
        if source == "live" and line.get("judged_at") is not None:
            source = f"live, step {line['judged_at']:,}"
        rows.append({"rank": str(line.get("rank")), "verdict": str(line.get("verdict")),
                     "status": str(line.get("status") or "-"),
                     "steps": f"{line.get('steps') or 0:,}", "growth": growth,
                     "top": str(line.get("top_finding") or "-"), "source": source})
    return rows


def job_lines(report: Report) -> list[str]:
    """A job's ranks in a few lines, however many ranks it has."""
    job = report.job
    if not job:
        return []
    status = ", ".join(f"{n:,} {s}" for s, n in job.get("status", {}).items())
    lines = [f"{job.get('ranks', 0):,} ranks: {status}"]
    near = job.get("killed_near_limit") or []
    if near:
        lines.append(f"killed near the memory limit (OOM?): rank{'s' if len(near) > 1 else ''} "
                     f"{', '.join(map(str, near[:20]))}{' ...' if len(near) > 20 else ''}")
    verdicts = ", ".join(f"{n:,} {v}" for v, n in job.get("verdicts", {}).items())
    sources = ", ".join(f"{n:,} {s}" for s, n in job.get("sources", {}).items())
    lines.append(f"verdicts: {verdicts}" + (f" (judged: {sources})" if sources else ""))
    for key, label, signed in (("main_uss_growth", "main USS growth per step", True),
                               ("main_rss_peak", "main RSS peak", False)):
        spread = job.get(key)
        if isinstance(spread, dict):
            unit = "/step" if signed else ""
            lines.append(f"{label}, over the ranks: " + ", ".join(
                f"{k} {format_bytes(spread.get(k), signed=signed)}{unit}"
                for k in ("min", "median", "max")))
    hidden = report.ranks[MAX_RANK_ROWS:]
    if hidden:
        from torchleak.analysis.runs import compress_ranks

        lines.append(f"{len(hidden):,} more leaking ranks: "
                     f"{compress_ranks([line['rank'] for line in hidden])}")
    for bad in job.get("unreadable", []):
        lines.append(f"rank {bad.get('rank')} unreadable: {bad.get('error')}")
    path = report.run.get("trace")
    folder = Path(str(path)).parent.parent if path else None
    if folder is not None:
        lines.append(f"one rank in full: torchleak report {folder} --rank N")
    return lines


def rate_text(finding: Finding) -> str:
    """What the process loses to this finding: per epoch when it grows per epoch."""
    if finding.per_epoch and finding.bytes_per_epoch is not None:
        text = f"{format_bytes(finding.bytes_per_epoch, signed=True)}/epoch"
    elif finding.bytes_per_step is not None:
        text = f"{format_bytes(finding.bytes_per_step, signed=True)}/step"
    else:
        return "-"
    where = SIGNAL_NAMES.get(finding.signal, finding.signal)
    if finding.rate_basis == "holder":
        return f"{text} (the holder's own size; {where} too flat to measure it)"
    if finding.rate_basis == "shared":
        return f"{text} of its own (what it keeps is counted under the other growing holders)"
    return f"{text} (measured: {where})"


def holder_size_text(finding: Finding) -> str | None:
    if finding.holder_bytes_per_step is None:
        return None
    text = f"{format_bytes(finding.holder_bytes_per_step, signed=True)}/step"
    if finding.retained_bytes is not None and finding.retained_at_step is not None:
        text += (f", {format_bytes(finding.retained_bytes)} at step "
                 f"{finding.retained_at_step:,}")
    return text


def oom_text(oom: OomProjection | None) -> str:
    if oom is None:
        return ""
    limit = f"{oom.limit_name} {format_bytes(oom.limit_bytes)}"
    if oom.steps_to_oom is None:
        return f"not heading for the {limit} limit"
    if oom.current_bytes >= oom.limit_bytes:
        return (f"already past the {limit} limit: {format_bytes(oom.current_bytes)} at step "
                f"{oom.at_step or 0:,}")
    when = f" (~{format_duration(oom.seconds_to_oom)})" if oom.seconds_to_oom is not None else ""
    return (f"{limit} reached in ~{oom.steps_to_oom:,.0f} steps{when}, from "
            f"{format_bytes(oom.current_bytes)} at step {oom.at_step or 0:,}")


def pattern_text(finding: Finding) -> str | None:
    if not finding.pattern:
        return None
    title = f"{finding.pattern_title}: " if finding.pattern_title else ""
    return f"{title}{DOC_PAGE}#{finding.pattern}"


def finding_facts(finding: Finding) -> list[tuple[str, str]]:
    """The labelled facts of one finding, in the order every screen shows them."""
    facts: list[tuple[str, str]] = [("rate", rate_text(finding))]
    own = holder_size_text(finding)
    if own:
        facts.append(("holder's own size", own))
    if finding.objects_per_step:
        facts.append(("objects", f"{format_count(finding.objects_per_step, signed=True)}/step"))
    if finding.oom is not None:
        facts.append(("OOM", oom_text(finding.oom)))
    if finding.detected_at_step is not None:
        facts.append(("growth visible from", f"step {finding.detected_at_step:,}"))
    for label, value in (("holder", finding.holder_path), ("source", finding.source),
                         ("category", finding.category), ("pattern", pattern_text(finding))):
        if value:
            facts.append((label, value))
    return facts


def signal_last(signal: Signal, steps: int) -> str:
    """The last value, with the step it was measured at when that is not the last step."""
    text = format_value(signal.end_value, signal.unit)
    if signal.last_step is not None and signal.last_step < steps:
        text += f" at step {signal.last_step:,}"
    return text


FLAT_BYTES_PER_STEP = 1024.0  # a healthy memory signal's slope below this reads "flat"


def signal_rate(signal: Signal) -> str:
    if signal.slope_per_step is None:
        return "not judged" if signal.verdict == "not judged" else "-"
    if signal.verdict == "plateau":
        return "levels off"
    if signal.verdict == "healthy":
        # A slope a finding may quote as its measured rate is shown, not called flat.
        if signal.unit == "bytes" and abs(signal.slope_per_step) >= FLAT_BYTES_PER_STEP:
            return f"{format_rate(signal.slope_per_step, signal.unit)} (below threshold)"
        return "flat"
    if signal.verdict != "growing":
        return signal.verdict
    return format_rate(signal.slope_per_step, signal.unit)


def metadata_rows(report: Report) -> list[tuple[str, str]]:
    run = report.run
    rows: list[tuple[str, str]] = [("name", str(run.get("name") or "")),
                                   ("status", status_of(report))]
    rows += [(k, _show(run[k])) for k in ("script", "argv", "exit_code", "pid", "hostname",
                                           "python", "torch", "platform", "rank", "world_size")
             if run.get(k) not in (None, "")]
    rows += [(k, format_time(run.get(k))) for k in ("start_time", "end_time") if run.get(k)]
    rows += [(k, format_bytes(run[k])) for k in ("ram_total", "swap_total", "cgroup_limit")
             if isinstance(run.get(k), (int, float))]
    if report.limit:
        rows.append(("limit", f"{report.limit.get('name')} "
                              f"{format_bytes(report.limit.get('bytes'))}"))
    rows += [(k, _show(run[k])) for k in ("devices", "gpu_totals", "budget_pct",
                                           "torchleak_version")
             if run.get(k) not in (None, "", [], {})]
    if report.overhead:
        rows.append(("torchleak's cost", overhead_text(report.overhead)))
    for change in report.safe:
        saved = (f"; gave back {format_bytes(change['saved_bytes'])} in {change.get('trims')} "
                 "trims" if change.get("saved_bytes") else "")
        rows.append(("--safe", f"{change.get('setting')}={change.get('value')} "
                               f"(was {change.get('was') or 'unset'}){saved}"))
    if run.get("cuda_snapshot"):
        rows.append(("CUDA allocator history", f"{run['cuda_snapshot']} (open it at "
                                               "pytorch.org/memory_viz)"))
    rows.append(("analysis", report.source))
    if run.get("trace"):
        rows.append(("trace", str(run["trace"])))
    return rows


def step_cost(ms_per_step: float, share: float) -> str:
    """'0.0398 ms per step (3.1% of a step' (the caller closes the bracket): one format
    wherever the figure is printed."""
    return f"{float(ms_per_step):.3g} ms per step ({100 * float(share):.2g}% of a step"


def overhead_text(overhead: dict[str, Any]) -> str:
    """torchleak's own cost in one line: time per step, the expensive probes against the
    budget, its own memory, and what was switched off."""
    if not overhead:
        return "-"
    text = step_cost(overhead.get("ms_per_step", 0), overhead.get("share", 0))
    if overhead.get("run_share") is not None:
        text += f", {100 * float(overhead['run_share']):.2g}% of the run"
    text += ")"
    if overhead.get("probe_seconds") is not None:
        text += f", expensive probes {overhead['probe_seconds']:.3g} s in all"
        if overhead.get("probe_share") is not None and overhead.get("budget") is not None:
            text += (f" ({overhead.get('anchor_probe_seconds', 0):.3g} s at anchors and the "
                     "run's events, the rest "
                     f"{100 * float(overhead['probe_share']):.2g}% of the wall time, budget "
                     f"{100 * float(overhead['budget']):.2g}%)")
    if overhead.get("live_seconds") is not None:
        text += (f", live detector {overhead['live_seconds']:.3g} s of CPU in "
                 f"{overhead.get('live_passes', 0)} passes")
        if overhead.get("live_share") is not None and overhead.get("live_cap") is not None:
            text += (f" ({overhead.get('live_deciding_seconds', 0):.3g} s re-checking "
                     f"suspects, the rest {100 * float(overhead['live_share']):.2g}% of the "
                     f"wall time, cap {100 * float(overhead['live_cap']):.2g}%)")
    if overhead.get("memory_bytes") is not None:
        text += f", own memory {format_bytes(overhead['memory_bytes'])}"
        if overhead.get("census_scan_bytes"):
            text += f" (+{format_bytes(overhead['census_scan_bytes'])} while a census scans)"
    if overhead.get("over_budget"):
        runs = overhead.get("probe_runs") if isinstance(overhead.get("probe_runs"), dict) else {}
        held = ", ".join(f"{name} {count}x" for name, count in runs.items())
        text += "; over its budget" + (f" (expensive probes ran: {held})" if held else "")
    if overhead.get("disabled"):
        text += f"; switched off: {', '.join(map(str, overhead['disabled']))}"
    return text


def guard_text(guard: dict[str, Any] | None) -> str | None:
    if not guard:
        return None
    when = guard.get("seconds_to_limit")
    why = ("memory passed its share of the limit" if guard.get("reason") == "limit"
           else f"the limit was projected in ~{format_duration(when)}")
    return (f"guard ({guard.get('mode')}) fired at step {format_count(guard.get('step'))}: {why} "
            f"({format_bytes(guard.get('memory_bytes'))} of {guard.get('limit_name')} "
            f"{format_bytes(guard.get('limit_bytes'))}); "
            f"{', '.join(guard.get('actions') or []) or 'no action'}")


def live_text(report: Report) -> list[str]:
    """What the live detector said, where the end does not keep it: one line a withdrawn
    call; a killed run's tier."""
    live = report.live or {}
    lines = [str(c.get("why")) for c in live.get("calls", []) if not c.get("kept")]
    if report.run.get("status") == "killed" and live.get("tier"):
        tier = {"called": "had called a leak", "suspected": "suspected growth but had not "
                "called a leak", "none": "had seen nothing growing"}.get(str(live["tier"]), "")
        if tier:
            lines.append(f"live detector before the run was killed: {tier}")
    return lines


def _show(value: Any) -> str:
    if isinstance(value, list):
        sep = "; " if any(isinstance(v, dict) for v in value) else " "
        return sep.join(_show(v) for v in value)
    if isinstance(value, dict):
        return ", ".join(f"{k}: {format_bytes(v) if k == 'total' and isinstance(v, int) else _show(v)}"
                         for k, v in value.items())
    return str(value)


def holder_rows(report: Report) -> list[dict[str, str]]:
    """The holders that grew most, first sample to last: who holds the memory."""
    return [{
        "holder": h.label,
        "kind": h.kind + (f" ({h.type_name})" if h.type_name else ""),
        "length": f"{format_count(h.first_length)} -> {format_count(h.last_length)}",
        "bytes": f"{format_bytes(h.first_bytes)} -> {format_bytes(h.last_bytes)}",
        "steps": f"{h.first_step:,}-{h.last_step:,}",
    } for h in report.holders]
