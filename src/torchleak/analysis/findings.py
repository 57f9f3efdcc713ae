"""From series to findings: judge every holder and memory signal, name and advise."""

from __future__ import annotations

from collections.abc import Sequence

from torchleak.analysis.advice import advice_for
from torchleak.analysis.oom import project
from torchleak.analysis.series import HolderSeries, RunData, Series
from torchleak.analysis.sources import find_source
from torchleak.analysis.stats import theil_sen
from torchleak.analysis.trend import Trend, judge
from torchleak.trace.schema import GRAPH_NODES_CAP as GRAPH_CAP
from torchleak.report import Finding, Signal

KIB = 1024.0
MIB = 1024.0 * 1024.0
MIN_ITEMS_GROWTH = 4  # a holder must gain at least this many items after warm-up
MIN_MEMORY_GROWTH = {"main_uss": 8 * MIB, "workers_uss": 8 * MIB,
                     "cuda_allocated": 8 * MIB, "cuda_reserved_unused": 64 * MIB}
HIGH_BYTES_PER_STEP = 16 * KIB
MEDIUM_BYTES_PER_STEP = 2 * KIB
_SIGNAL_TITLES = {"tensors": "live tensors", "graph_nodes": "autograd nodes",
                  "main_uss": "main process memory (USS)", "workers_uss":
                  "DataLoader worker memory (USS, summed)", "cuda_allocated": "CUDA allocated",
                  "cuda_reserved_unused": "CUDA reserved but unallocated"}


def warmup_steps(steps: int) -> float:
    """Healthy growth happens early (H3, H4): ignore the first 10% (3 to 50 steps)."""
    return max(3.0, min(50.0, 0.1 * steps))


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


def holder_findings(data: RunData, memory: dict[str, tuple[Series, Trend]]) -> list[Finding]:
    warmup = warmup_steps(data.steps)
    main = memory.get("main_uss")
    main_slope = main[1].slope if main and main[1].growing else 0.0
    found = []
    for holder in data.holders.values():
        finding = _judge_holder(data, holder, warmup, main_slope)
        if finding is not None:
            found.append(finding)
    return found


def _metric(holder: HolderSeries) -> tuple[list[float], str, str]:
    """(values, finding kind, unit) for the quantity that grows in this holder."""
    if holder.kind == "tensor" and any(holder.graph_nodes):
        return holder.graph_nodes, "autograd_graph", "autograd nodes"
    if holder.kind == "container" and any(holder.tensors):
        kind = "tensor_list_graph" if any(holder.grad_fn_tensors) else "tensor_list"
        return holder.length, kind, "items"
    units = {"hooks": "hooks", "cache": "entries", "figures": "open figures",
             "tensor": "elements"}
    kind = {"tensor": "tensor_growth"}.get(holder.kind, holder.kind)
    return holder.length, kind, units.get(holder.kind, "items")


def uncapped(steps: list[int], values: list[float], kind: str) -> tuple[list[int], list[float]]:
    """Graph counts stop at the walker's cap: judge the samples before it was reached."""
    if kind != "autograd_graph" or not values or values[-1] < GRAPH_CAP:
        return steps, values
    keep = [i for i, v in enumerate(values) if v < GRAPH_CAP]
    first_capped = len(keep)
    keep.append(first_capped)  # one capped point still proves it got there
    return [steps[i] for i in keep], [values[i] for i in keep]


def _bounded(holder: HolderSeries) -> bool:
    if holder.kind == "dataloader":
        return True
    if holder.detail.get("maxlen") is not None:
        return True  # deque(maxlen=...) cannot grow past its bound
    return holder.kind == "cache" and holder.detail.get("maxsize") is not None


def _judge_holder(data: RunData, holder: HolderSeries, warmup: float,
                  main_slope: float) -> Finding | None:
    if _bounded(holder) or len(holder.steps) < 3:
        return None
    values, kind, unit = _metric(holder)
    if values[-1] <= values[0]:
        return None  # cheap pre-filter: most holders are flat
    steps, values = uncapped(holder.steps, values, kind)
    trend = judge(steps, values, warmup=warmup, min_growth=MIN_ITEMS_GROWTH, exact=True)
    if not trend.growing:
        return None
    bytes_rate = _bytes_rate(holder, warmup)
    if bytes_rate <= 0 and kind in ("autograd_graph", "cache", "tensor_growth", "figures"):
        bytes_rate = main_slope  # no per-item size: the process's own growth
    per_epoch, steps_per_epoch = _per_epoch(data, holder, values)
    name = _short_name(holder)
    advice = advice_for(_advice_kind(kind, holder), name)
    culprit = _culprit(holder, kind, unit, trend.slope, bytes_rate, per_epoch, steps_per_epoch)
    finding = Finding(
        kind=kind, culprit=culprit, severity=_severity(kind, bytes_rate, holder, trend),
        fix=advice.fix, pattern=advice.pattern, signal="main_uss",
        bytes_per_step=round(bytes_rate, 1), objects_per_step=round(trend.slope, 4),
        per_epoch=per_epoch, holder_path=holder.holder,
        bytes_per_epoch=round(bytes_rate * steps_per_epoch, 1) if per_epoch else None,
        retained_bytes=int(holder.bytes[-1]) or None,
        source=find_source(data.meta.get("script"), holder.kind, name) or holder.detail.get("source"),
        evidence=[f"{holder.holder}: {unit} {values[0]:.0f} at step {holder.steps[0]} -> "
                  f"{values[-1]:.0f} at step {holder.steps[-1]} ({trend.reason})"])
    finding.oom = project(data, "main_uss", _current(data, "main_uss"), bytes_rate)
    return finding


def _short_name(holder: HolderSeries) -> str:
    """The identifier a user would grep for: ``train_outputs``, ``build_pair_mask``."""
    if holder.kind == "cache":
        return str(holder.detail.get("function", "")).split(".")[-1]
    return holder.holder.split(" ")[0].split(".")[-1].split("[")[0].rstrip("()")


def _advice_kind(kind: str, holder: HolderSeries) -> str:
    if kind in ("tensor_list", "container") and "metric" in holder.holder.lower():
        return "metric_state"
    if kind == "tensor_growth":
        return "tensor_list"
    return kind


def _bytes_rate(holder: HolderSeries, warmup: float) -> float:
    pts = [(s, b) for s, b in zip(holder.steps, holder.bytes) if s > warmup]
    if len(pts) < 2:
        return 0.0
    return max(0.0, theil_sen([p[0] for p in pts], [p[1] for p in pts]))


def _per_epoch(data: RunData, holder: HolderSeries, values: Sequence[float]) -> tuple[bool, float]:
    """Growth that happens at a few steps, about once per epoch (validation outputs)."""
    ends = data.epoch_ends()
    if len(ends) < 2:
        return False, 0.0
    steps_per_epoch = (ends[-1] - ends[0]) / (len(ends) - 1)
    rises = sum(1 for a, b in zip(values, values[1:]) if b > a)
    intervals = len(values) - 1
    samples_per_epoch = intervals / max(1.0, (holder.steps[-1] - holder.steps[0]) / steps_per_epoch)
    return samples_per_epoch > 1.5 and rises <= 1.3 * len(ends), steps_per_epoch


def _severity(kind: str, bytes_rate: float, holder: HolderSeries, trend: Trend) -> str:
    if bytes_rate >= HIGH_BYTES_PER_STEP:
        return "high"
    if kind in ("autograd_graph", "hooks", "figures", "cache", "tensor_list_graph"):
        return "medium" if bytes_rate < HIGH_BYTES_PER_STEP else "high"
    if kind == "tensor_list" and trend.slope >= 0.2:
        return "medium"
    return "medium" if bytes_rate >= MEDIUM_BYTES_PER_STEP else "low"


def _culprit(holder: HolderSeries, kind: str, unit: str, slope: float, bytes_rate: float,
             per_epoch: bool, steps_per_epoch: float) -> str:
    scale, per = (steps_per_epoch, "epoch") if per_epoch else (1.0, "step")
    rate = f"+{slope * scale:.3g} {unit}/{per}"
    size = f", {_fmt_bytes(bytes_rate * scale)}/{per}" if bytes_rate > 0 else ""
    label = display_name(holder)
    if kind == "autograd_graph":
        return f"{label} (Tensor with grad_fn): autograd graph {rate}{size}"
    if kind == "hooks":
        hook = holder.detail.get("hook", "?")
        return f"{label} ({rate}, hook {hook}{size})"
    if kind == "cache":
        return f"{label} ({rate}; maxsize=None{size})"
    if kind == "figures":
        return f"matplotlib.pyplot: {holder.length[-1]:.0f} open figures ({rate}{size})"
    item = holder.detail.get("item_type")
    what = f"{holder.type_name} of {item}" if item else holder.type_name
    return f"{label} ({what}, {rate}{size})"


def display_name(holder: HolderSeries) -> str:
    """How a person names the holder: ``Trainer.outputs (via fit().trainer)``,
    ``local running_loss in main()``, ``global _ACTIVATIONS in model.py``."""
    label = holder.detail.get("label")
    if not label or label == holder.holder:
        return holder.holder
    if label.startswith(("local ", "global ")):
        return label
    return f"{label} (via {holder.holder})"


def _fmt_bytes(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if abs(n) < 1024 or unit == "GB":
            return f"{n:.3g} {unit}" if unit != "B" else f"{n:.0f} B"
        n /= 1024.0
    return f"{n:.3g} GB"


def _current(data: RunData, signal: str) -> float:
    series = data.memory.get(signal)
    return series.y[-1] if series and series.y else 0.0


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
            found.append(_plain_finding(data, name, trend, "memory", _plain_severity(trend)))
    return found


def _plain_severity(trend: Trend) -> str:
    return "medium" if trend.slope >= HIGH_BYTES_PER_STEP else "low"


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
    culprit = f"DataLoader workers: USS +{_fmt_bytes(trend.slope)}/step{where}"
    sev = "high" if trend.slope >= HIGH_BYTES_PER_STEP else "medium"
    finding = Finding(kind="worker_memory", culprit=culprit, severity=sev, fix=advice.fix,
                      pattern=advice.pattern, signal="workers_uss",
                      bytes_per_step=round(trend.slope, 1),
                      evidence=[f"summed worker USS {_fmt_bytes(trend.start)} -> "
                                f"{_fmt_bytes(trend.end)} ({trend.reason})"])
    finding.oom = project(data, "workers_uss", _current(data, "workers_uss"), trend.slope)
    return finding


def _plain_finding(data: RunData, signal: str, trend: Trend, kind: str, severity: str) -> Finding:
    advice = advice_for(kind)
    title = _SIGNAL_TITLES.get(signal, signal)
    tensors = data.census.get("tensors")
    evidence = [f"{title}: {_fmt_bytes(trend.start)} -> {_fmt_bytes(trend.end)} "
                f"({trend.reason})"]
    if tensors and len(tensors.y) >= 2:
        evidence.append(f"live tensors {tensors.y[0]:.0f} at step {tensors.x[0]:.0f} -> "
                        f"{tensors.y[-1]:.0f} at step {tensors.x[-1]:.0f}")
    culprit = f"{title}: +{_fmt_bytes(trend.slope)}/step, no named holder"
    finding = Finding(kind=kind, culprit=culprit, severity=severity, fix=advice.fix,
                      pattern=advice.pattern, signal=signal, bytes_per_step=round(trend.slope, 1),
                      evidence=evidence)
    finding.oom = project(data, signal, _current(data, signal), trend.slope)
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
