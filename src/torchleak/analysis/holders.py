"""Judge every holder the recorder named: does it grow without bound, how fast, and why.

A holder can grow in what it counts (items, hooks, cache entries, open figures, autograd
nodes) or only in what it retains (a dict of ten tensors each grown by ``torch.cat``, a
list of three 5 MB checkpoints). Both are judged, counts first. Autograd-node counts have
no warm-up (one step's graph is the same size every step: any growth is a leak) and stop
at the walker's cap, past which only the samples before it are judged.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from torchleak.analysis.advice import advice_for
from torchleak.analysis.oom import project
from torchleak.analysis.series import HolderSeries, RunData
from torchleak.analysis.sources import find_source
from torchleak.analysis.stats import theil_sen
from torchleak.analysis.trend import Trend, first_growing_step, judge
from torchleak.analysis.units import (HIGH_BYTES_PER_STEP, MEDIUM_BYTES_PER_STEP, MIB, current,
                                      fmt_bytes, warmup_steps)
from torchleak.report import Finding
from torchleak.trace.schema import GRAPH_NODES_CAP

MIN_ITEMS_GROWTH = 4  # a holder must gain at least this many items after warm-up
MIN_BYTES_GROWTH = 4 * MIB  # ... or retain this many more bytes
COUNT_WARMUP = 3.0


@dataclass
class Metric:
    values: list[float]
    kind: str  # the finding kind
    unit: str
    min_growth: float
    graph: bool = False  # autograd nodes: no warm-up, capped

    def warmup(self, steps: int) -> float:
        """Exact counts need little warm-up: what fills early and stops is caught by the
        plateau test, and a step's graph never grows (no warm-up at all)."""
        return 0.0 if self.graph else min(COUNT_WARMUP, warmup_steps(steps))


def metrics(holder: HolderSeries) -> list[Metric]:
    """What may grow in this holder, in the order it is judged."""
    found = []
    if holder.kind == "tensor" and any(holder.graph_nodes):
        found.append(Metric(holder.graph_nodes, "autograd_graph", "autograd nodes",
                            MIN_ITEMS_GROWTH, graph=True))
    elif holder.kind == "container" and any(holder.tensors):
        kind = "tensor_list_graph" if any(holder.grad_fn_tensors) else "tensor_list"
        found.append(Metric(holder.length, kind, "items", MIN_ITEMS_GROWTH))
    else:
        units = {"hooks": "hooks", "cache": "entries", "figures": "open figures",
                 "tensor": "elements"}
        kind = {"tensor": "tensor_growth"}.get(holder.kind, holder.kind)
        found.append(Metric(holder.length, kind, units.get(holder.kind, "items"),
                            MIN_ITEMS_GROWTH))
    if holder.kind in ("container", "tensor") and any(holder.bytes):
        kind = "tensor_growth" if any(holder.tensors) else "container"
        found.append(Metric(holder.bytes, kind, "bytes", MIN_BYTES_GROWTH))
    return found


def holder_findings(data: RunData, main_slope: float, replay: bool = True) -> list[Finding]:
    found = []
    for holder in data.holders.values():
        if _bounded(holder) or len(holder.steps) < 3:
            continue
        for metric in metrics(holder):
            finding = _judge(data, holder, metric, main_slope, replay)
            if finding is not None:
                found.append(finding)
                break
    return found


def _bounded(holder: HolderSeries) -> bool:
    if holder.kind == "dataloader":
        return True
    if holder.detail.get("maxlen") is not None:
        return True  # deque(maxlen=...) cannot grow past its bound
    return holder.kind == "cache" and holder.detail.get("maxsize") is not None


def _uncapped(steps: list[int], values: list[float]) -> tuple[list[int], list[float]]:
    """Graph counts stop at the walker's cap: the samples before it, plus one at it."""
    if not values or values[-1] < GRAPH_NODES_CAP:
        return steps, values
    keep = [i for i, v in enumerate(values) if v < GRAPH_NODES_CAP]
    keep.append(len(keep))
    return [steps[i] for i in keep], [values[i] for i in keep]


def _judge(data: RunData, holder: HolderSeries, metric: Metric, main_slope: float,
           replay: bool) -> Finding | None:
    if metric.values[-1] <= metric.values[0]:
        return None  # cheap pre-filter: most holders are flat
    steps, values = holder.steps, metric.values
    if metric.graph:
        steps, values = _uncapped(steps, values)
    trend = judge(steps, values, warmup=metric.warmup(data.steps),
                  min_growth=metric.min_growth, exact=True)
    if not trend.growing:
        return None
    warmup = metric.warmup(data.steps)
    bytes_rate = trend.slope if metric.unit == "bytes" else _bytes_rate(holder, warmup)
    if bytes_rate <= 0 and metric.kind in ("autograd_graph", "cache", "tensor_growth", "figures"):
        bytes_rate = main_slope  # no per-item size: the process's own growth
    per_epoch, steps_per_epoch = _per_epoch(data, holder, values)
    name = _short_name(holder)
    advice = advice_for(_advice_kind(metric.kind, holder), name)
    finding = Finding(
        kind=metric.kind, severity=_severity(metric.kind, bytes_rate, trend),
        culprit=_culprit(holder, metric, trend.slope, bytes_rate, per_epoch, steps_per_epoch),
        fix=advice.fix, pattern=advice.pattern, signal="main_uss",
        bytes_per_step=round(bytes_rate, 1),
        objects_per_step=round(_item_rate(holder, metric, trend, warmup), 4),
        per_epoch=per_epoch, holder_path=holder.holder,
        bytes_per_epoch=round(bytes_rate * steps_per_epoch, 1) if per_epoch else None,
        retained_bytes=int(holder.bytes[-1]) or None,
        source=find_source(data.meta.get("script"), holder.kind, name) or holder.detail.get("source"),
        evidence=[_evidence(holder, metric, values, steps, trend)])
    finding.oom = project(data, "main_uss", current(data, "main_uss"), bytes_rate)
    if replay:
        finding.detected_at_step = first_growing_step(
            steps, values, min_growth=metric.min_growth, exact=True,
            warmup=lambda step: metric.warmup(int(step)))
    return finding


def _evidence(holder: HolderSeries, metric: Metric, values: Sequence[float],
              steps: Sequence[int], trend: Trend) -> str:
    show = fmt_bytes if metric.unit == "bytes" else (lambda v: f"{v:.0f}")
    return (f"{holder.holder}: {metric.unit} {show(values[0])} at step {steps[0]} -> "
            f"{show(values[-1])} at step {steps[-1]} ({trend.reason})")


def _item_rate(holder: HolderSeries, metric: Metric, trend: Trend, warmup: float) -> float:
    if metric.unit != "bytes":
        return trend.slope
    pts = [(s, v) for s, v in zip(holder.steps, holder.length) if s > warmup]
    return max(0.0, theil_sen([p[0] for p in pts], [p[1] for p in pts])) if len(pts) > 1 else 0.0


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


def _severity(kind: str, bytes_rate: float, trend: Trend) -> str:
    if bytes_rate >= HIGH_BYTES_PER_STEP:
        return "high"
    if kind in ("autograd_graph", "hooks", "figures", "cache", "tensor_list_graph"):
        return "medium"
    if kind == "tensor_list" and trend.slope >= 0.2:
        return "medium"
    return "medium" if bytes_rate >= MEDIUM_BYTES_PER_STEP else "low"


def _culprit(holder: HolderSeries, metric: Metric, slope: float, bytes_rate: float,
             per_epoch: bool, steps_per_epoch: float) -> str:
    scale, per = (steps_per_epoch, "epoch") if per_epoch else (1.0, "step")
    if metric.unit == "bytes":
        rate = f"+{fmt_bytes(slope * scale)}/{per} retained"
        size = ""
    else:
        rate = f"+{slope * scale:.3g} {metric.unit}/{per}"
        size = f", {fmt_bytes(bytes_rate * scale)}/{per}" if bytes_rate > 0 else ""
    label = display_name(holder)
    if metric.kind == "autograd_graph":
        return f"{label} (Tensor with grad_fn): autograd graph {rate}{size}"
    if metric.kind == "hooks":
        return f"{label} ({rate}, hook {holder.detail.get('hook', '?')}{size})"
    if metric.kind == "cache":
        return f"{label} ({rate}; maxsize=None{size})"
    if metric.kind == "figures":
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
    if label.startswith(("local ", "global ", "closure ")):
        return label
    return f"{label} (via {holder.holder})"
