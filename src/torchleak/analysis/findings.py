"""From memory series to findings: workers, fragmentation, growth no holder explains.

Holders are judged in ``torchleak.analysis.holders``.
"""

from __future__ import annotations

from torchleak.analysis.advice import advice_for
from torchleak.analysis.oom import project
from torchleak.analysis.series import RunData, Series
from torchleak.analysis.trend import Trend, judge
from torchleak.analysis.units import HIGH_BYTES_PER_STEP, MIB, current, fmt_bytes, warmup_steps
from torchleak.report import Finding, Signal

MIN_MEMORY_GROWTH = {"main_uss": 8 * MIB, "workers_uss": 8 * MIB,
                     "cuda_allocated": 8 * MIB, "cuda_reserved_unused": 64 * MIB}
_SIGNAL_TITLES = {"tensors": "live tensors", "graph_nodes": "autograd nodes",
                  "main_uss": "main process memory (USS)", "workers_uss":
                  "DataLoader worker memory (USS, summed)", "cuda_allocated": "CUDA allocated",
                  "cuda_reserved_unused": "CUDA reserved but unallocated"}


UNNAMED_MIN_FRACTION = 0.10
UNNAMED_MIN_BYTES = 64 * MIB

# Census series are sparse (anchors + budget), judged only when a long run gave enough.
MIN_CENSUS_GROWTH = {"tensors": 16.0, "graph_nodes": 256.0}


def judge_signals(data: RunData) -> dict[str, tuple[Series, Trend]]:
    warmup = warmup_steps(data.steps)
    judged = {}
    for name, series in data.memory.items():
        trend = judge(series.x, series.y, warmup=warmup, windows=20,
                      min_growth=MIN_MEMORY_GROWTH.get(name, 8 * MIB))
        judged[name] = (series, trend)
    for name, min_growth in MIN_CENSUS_GROWTH.items():
        series = data.census.get(name)
        if series is not None and len(series.x) >= 5:
            judged[name] = (series, judge(series.x, series.y, warmup=warmup, windows=20,
                                          min_growth=min_growth))
    return judged


def signal_findings(data: RunData, memory: dict[str, tuple[Series, Trend]],
                    named: list[Finding]) -> list[Finding]:
    """Findings for memory that grows: workers, fragmentation, and growth no holder explains."""
    found = []
    for name, (series, trend) in memory.items():
        if not trend.growing:
            continue
        if name == "workers_uss":
            found.append(_worker_finding(data, trend))
        elif name == "cuda_reserved_unused":
            found.append(_plain_finding(data, name, trend, "fragmentation", "low"))
        elif name in MIN_CENSUS_GROWTH:
            if not named:
                found.append(_census_finding(data, name, trend))
        elif not any(f.severity in ("high", "medium") for f in named):
            found.append(_plain_finding(data, name, trend, "memory",
                                        _plain_severity(trend, series)))
    return found


def _plain_severity(trend: Trend, series: Series) -> str:
    """Growth no holder explains is called a leak only when it is steady (a rise that
    slows down is allocator arenas or buffers filling) and large: at least
    ``UNNAMED_MIN_FRACTION`` of where it started or ``UNNAMED_MIN_BYTES`` (an allocator
    that keeps freed pages creeps by a few percent). Otherwise it is noted as low."""
    if trend.slope < HIGH_BYTES_PER_STEP or _decelerating(series, trend):
        return "low"
    growth = trend.slope * (trend.last_step - trend.first_step)
    large = growth >= max(UNNAMED_MIN_FRACTION * trend.start, 0) or growth >= UNNAMED_MIN_BYTES
    return "medium" if large else "low"


def _decelerating(series: Series, trend: Trend) -> bool:
    """The second half of the window grew less than half as fast as the first."""
    pts = [(x, y) for x, y in zip(series.x, series.y) if trend.first_step <= x <= trend.last_step]
    if len(pts) < 8:
        return False
    mid = (trend.first_step + trend.last_step) / 2
    first = [y for x, y in pts if x <= mid]
    second = [y for x, y in pts if x > mid]
    rise_first = min(second[: max(1, len(second) // 4)]) - min(first)
    rise_second = min(second[-max(1, len(second) // 4):]) - min(second)
    return rise_first > 0 and rise_second < 0.5 * rise_first


def _worker_finding(data: RunData, trend: Trend) -> Finding:
    advice = advice_for("workers")
    loaders = [h for h in data.holders.values() if h.kind == "dataloader"]
    where = ""
    if loaders:
        detail = loaders[-1].detail
        big = detail.get("big_attributes") or {}
        dataset = detail.get("dataset", "Dataset")
        parts = [f"{dataset}.{attr} ({v.get('type')} of {v.get('length'):,} {v.get('item_type')})"
                 for attr, v in big.items()]
        where = (" - " + ", ".join(parts) + " touched by workers (copy-on-read)") if parts else (
            f" - {dataset}")
        if detail.get("persistent_workers"):
            where += "; persistent_workers=True keeps it across epochs"
    culprit = f"DataLoader workers: USS +{fmt_bytes(trend.slope)}/step{where}"
    sev = "high" if trend.slope >= HIGH_BYTES_PER_STEP else "medium"
    finding = Finding(kind="worker_memory", culprit=culprit, severity=sev, fix=advice.fix,
                      pattern=advice.pattern, signal="workers_uss",
                      bytes_per_step=round(trend.slope, 1),
                      evidence=[f"summed worker USS {fmt_bytes(trend.start)} -> "
                                f"{fmt_bytes(trend.end)} ({trend.reason})"])
    finding.oom = project(data, "workers_uss", current(data, "workers_uss"), trend.slope)
    return finding


def _plain_finding(data: RunData, signal: str, trend: Trend, kind: str, severity: str) -> Finding:
    advice = advice_for(kind)
    title = _SIGNAL_TITLES.get(signal, signal)
    tensors = data.census.get("tensors")
    evidence = [f"{title}: {fmt_bytes(trend.start)} -> {fmt_bytes(trend.end)} "
                f"({trend.reason})"]
    if tensors and len(tensors.y) >= 2:
        evidence.append(f"live tensors {tensors.y[0]:.0f} at step {tensors.x[0]:.0f} -> "
                        f"{tensors.y[-1]:.0f} at step {tensors.x[-1]:.0f}")
    culprit = f"{title}: +{fmt_bytes(trend.slope)}/step, no named holder"
    finding = Finding(kind=kind, culprit=culprit, severity=severity, fix=advice.fix,
                      pattern=advice.pattern, signal=signal, bytes_per_step=round(trend.slope, 1),
                      evidence=evidence)
    finding.oom = project(data, signal, current(data, signal), trend.slope)
    return finding


def _census_finding(data: RunData, name: str, trend: Trend) -> Finding:
    """Live tensors or autograd nodes grow with no named holder: C++ or unnamed owners."""
    advice = advice_for("tensors")
    unit = "live tensors" if name == "tensors" else "autograd nodes"
    culprit = f"{unit} +{trend.slope:.3g}/step, not reachable from a name in your code"
    severity = "medium" if name == "graph_nodes" or trend.slope >= 0.5 else "low"
    return Finding(kind="tensor_growth" if name == "tensors" else "autograd_graph",
                   culprit=culprit, severity=severity, fix=advice.fix, pattern=advice.pattern,
                   signal=name, objects_per_step=round(trend.slope, 4),
                   evidence=[f"census {unit}: {trend.start:.0f} -> {trend.end:.0f} ({trend.reason})"])


def signal_summaries(memory: dict[str, tuple[Series, Trend]]) -> list[Signal]:
    return [Signal(name=name, unit=series.unit, verdict=trend.verdict,
                   slope_per_step=round(trend.slope, 3),
                   start_value=series.y[0] if series.y else None,
                   end_value=series.y[-1] if series.y else None, note=trend.reason)
            for name, (series, trend) in memory.items()]
