"""Judge every holder the recorder named: does it grow without bound, how fast, and why.

A holder can grow in what it counts (items, hooks, cache entries, open figures, autograd
nodes) or only in what it retains (a dict of ten tensors each grown by ``torch.cat``, a
bytearray extended in place). Both are judged, counts first. Autograd-node counts have no
warm-up (one step's graph is the same size every step: any growth is a leak) and stop at
the walker's cap, past which only the samples before it are judged.

A holder finding carries the holder's *own* growth (``holder_bytes_per_step``); the rate
the process measurably loses to it is assigned afterwards (``rates``).
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass

from torchleak.analysis.advice import MECHANISMS, MODEL_ADVICE, THREAD_ADVICE, advice_for
from torchleak.analysis.series import HolderSeries, RunData
from torchleak.analysis.sources import find_source
from torchleak.analysis.stats import theil_sen
from torchleak.analysis.trend import Trend, first_growing_step, judge
from torchleak.analysis.thresholds import HIGH_BYTES_PER_STEP, MEDIUM_BYTES_PER_STEP, MIB, warmup_steps
from torchleak.report import Finding
from torchleak.trace.schema import GRAPH_NODES_CAP
from torchleak.units import format_bytes, number
from torchleak.vocab import FindingKind as K
from torchleak.vocab import Severity
from torchleak.vocab import Signal as S

MIN_ITEMS_GROWTH = 4  # a holder must gain at least this many items after warm-up
MIN_BYTES_GROWTH = 4 * MIB  # ... or retain this many more bytes
COUNT_WARMUP = 3.0
_EMPTY_WHEN_ABSENT = ("container", "hooks", "cache", "figures", "buffer")


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


@dataclass
class HolderFinding:
    finding: Finding
    onset: float  # the first step of the growth window
    holder: HolderSeries
    steps_per_epoch: float = 0.0  # when the growth comes once per epoch
    steps: Sequence[float] = ()  # the series the growth was judged on
    values: Sequence[float] = ()


def metrics(holder: HolderSeries, values: dict[str, list[float]]) -> list[Metric]:
    """What may grow in this holder, in the order it is judged."""
    found = []
    if holder.kind == "tensor" and any(values["graph_nodes"]):
        found.append(Metric(values["graph_nodes"], K.AUTOGRAD_GRAPH, "autograd nodes",
                            MIN_ITEMS_GROWTH, graph=True))
    elif holder.kind == "container" and any(values["tensors"]):
        kind = K.TENSOR_LIST_GRAPH if any(values["grad_fn_tensors"]) else K.TENSOR_LIST
        found.append(Metric(values["length"], kind, "items", MIN_ITEMS_GROWTH))
    elif holder.kind != "buffer":
        units = {"hooks": "hooks", "cache": "entries", "figures": "open figures",
                 "tensor": "elements"}
        kind = {"tensor": K.TENSOR_GROWTH}.get(holder.kind, holder.kind)
        found.append(Metric(values["length"], kind, units.get(holder.kind, "items"),
                            MIN_ITEMS_GROWTH))
    if holder.kind in ("container", "tensor", "buffer") and any(values["bytes"]):
        kind = K.BUFFER if holder.kind == "buffer" else (
            K.TENSOR_GROWTH if any(values["tensors"]) else K.CONTAINER)
        found.append(Metric(values["bytes"], kind, "bytes", MIN_BYTES_GROWTH))
    return found


def holder_findings(data: RunData, replay: bool = True) -> list[HolderFinding]:
    found = []
    for holder in data.holders.values():
        if bounded_by_construction(holder) or len(holder.steps) < 3 or holder.kind in (
                "dataloader", "native", "switch"):
            continue
        steps, values = _with_empty_start(holder, data.full_walks)
        for metric in metrics(holder, values):
            judged = _judge(data, holder, metric, steps, replay)
            if judged is not None:
                found.append(judged)
                break
    return found


def _with_empty_start(holder: HolderSeries, walks: list[int]) -> tuple[list[float],
                                                                       dict[str, list[float]]]:
    """Empty containers are not recorded: a holder missing from a full walk before its
    first sample was empty (or not created yet), so it starts from zero there. This is
    what lets a list filled once per epoch show its first rise."""
    names = ("length", "bytes", "tensors", "grad_fn_tensors", "graph_nodes")
    values = {name: list(getattr(holder, name)) for name in names}
    steps = list(holder.steps)
    i = bisect.bisect_left(walks, steps[0])
    if i > 0 and holder.kind in _EMPTY_WHEN_ABSENT:
        steps.insert(0, float(walks[i - 1]))
        for series in values.values():
            series.insert(0, 0.0)
    return steps, values


def bounded_by_construction(holder: HolderSeries) -> bool:
    """``deque(maxlen=…)`` or ``lru_cache(maxsize=…)``: it stops at its bound."""
    if holder.detail.get("maxlen") is not None:
        return True  # deque(maxlen=...) cannot grow past its bound
    return holder.kind == "cache" and holder.detail.get("maxsize") is not None


def _uncapped(steps: list[float], values: list[float]) -> tuple[list[float], list[float]]:
    """Graph counts stop at the walker's cap: the samples before it, plus one at it."""
    if not values or values[-1] < GRAPH_NODES_CAP:
        return steps, values
    keep = [i for i, v in enumerate(values) if v < GRAPH_NODES_CAP]
    keep.append(len(keep))
    return [steps[i] for i in keep], [values[i] for i in keep]


def _judge(data: RunData, holder: HolderSeries, metric: Metric, all_steps: list[float],
           replay: bool) -> HolderFinding | None:
    if metric.values[-1] <= metric.values[0]:
        return None  # cheap pre-filter: most holders are flat
    steps, values = all_steps, metric.values
    if metric.graph:
        steps, values = _uncapped(steps, values)
    warmup = metric.warmup(data.steps)
    trend = judge(steps, values, warmup=warmup, min_growth=metric.min_growth, exact=True)
    if not trend.growing or (metric.kind == K.AUTOGRAD_GRAPH and _graph_of_growing_model(holder)):
        return None
    own_rate = trend.slope if metric.unit == "bytes" else _bytes_rate(holder, warmup)
    per_epoch, steps_per_epoch = _per_epoch(data, holder, values)
    name = short_name(holder)
    advice = advice_for(_advice_kind(metric.kind, holder), name)
    finding = Finding(
        kind=metric.kind, severity=_severity(metric.kind, own_rate, trend),
        culprit=_culprit(holder, metric, trend.slope, per_epoch, steps_per_epoch),
        fix=advice.fix, pattern=advice.pattern.anchor, pattern_title=advice.pattern.title,
        signal=_signal_of(holder), holder_bytes_per_step=round(own_rate, 1) if own_rate else None,
        objects_per_step=round(_item_rate(holder, metric, trend, warmup), 4),
        per_epoch=per_epoch, holder_path=holder.holder, holder_name=name or None,
        holder_kind=holder.kind,
        retained_bytes=int(holder.bytes[-1]) or None, retained_at_step=int(holder.steps[-1]),
        source=find_source(data.meta.get("script"), holder.kind, name) or holder.detail.get(
            "source"),
        evidence=[_evidence(holder, metric, values, steps, trend)])
    if replay:
        finding.detected_at_step = first_growing_step(
            steps, values, min_growth=metric.min_growth, exact=True,
            warmup=lambda step: metric.warmup(int(step)))
    return HolderFinding(finding, trend.first_step, holder,
                         steps_per_epoch if per_epoch else 0.0, steps, values)


def _signal_of(holder: HolderSeries) -> str:
    device = str(holder.detail.get("device") or "cpu")
    return S.CUDA_ALLOCATED.value if device.startswith("cuda") else S.MAIN_USS.value


def _evidence(holder: HolderSeries, metric: Metric, values: Sequence[float],
              steps: Sequence[float], trend: Trend) -> str:
    show = format_bytes if metric.unit == "bytes" else (lambda v: f"{v:,.0f}")
    return (f"{display_name(holder)}: {metric.unit} {show(values[0])} at step {steps[0]:.0f} -> "
            f"{show(values[-1])} at step {steps[-1]:.0f} ({trend.reason})")


def _item_rate(holder: HolderSeries, metric: Metric, trend: Trend, warmup: float) -> float:
    if metric.unit != "bytes":
        return trend.slope
    pts = [(s, v) for s, v in zip(holder.steps, holder.length) if s > warmup]
    return max(0.0, theil_sen([p[0] for p in pts], [p[1] for p in pts])) if len(pts) > 1 else 0.0


def short_name(holder: HolderSeries) -> str:
    """The identifier a user would grep for: ``train_outputs``, ``build_pair_mask``."""
    if holder.kind == "cache":
        return str(holder.detail.get("function", "")).split(".")[-1]
    return name_in_path(holder.holder)


def name_in_path(path: str) -> str:
    """The last name of a holder's path (``train().epoch_logits[3]`` -> ``epoch_logits``):
    the one reading of a path, for a holder and for a report that predates
    ``Finding.holder_name``."""
    return path.split(" ")[0].split(".")[-1].split("[")[0].rstrip("()")


def _graph_of_growing_model(holder: HolderSeries) -> bool:
    """A fresh graph each step that grows because the model does (parameters added while
    training): its leaves (one per parameter) grow in step with its nodes. A graph chained
    across steps (a tensor sum) reaches the same leaves again: its nodes grow, they do not.
    The growing model is named by its own holders (submodules, optimizer state)."""
    first_leaves = number(holder.detail.get("graph_leaves_first")) or 0.0
    leaves = number(holder.detail.get("graph_leaves")) or 0.0
    first_nodes = number(holder.detail.get("graph_nodes_first")) or 0.0
    if first_leaves <= 0 or first_nodes <= 0 or not holder.graph_nodes:
        return False
    leaf_growth, node_growth = leaves / first_leaves, holder.graph_nodes[-1] / first_nodes
    return leaf_growth >= 1.5 and leaf_growth >= 0.25 * node_growth


def _advice_kind(kind: str, holder: HolderSeries) -> str:
    if holder.detail.get("mechanism") in MECHANISMS:
        return str(holder.detail["mechanism"])
    if holder.holder.startswith("thread:"):
        return THREAD_ADVICE
    if holder.detail.get("model_part"):
        return MODEL_ADVICE
    if kind in (K.TENSOR_LIST, K.CONTAINER) and "metric" in holder.holder.lower():
        return K.METRIC_STATE
    if kind == K.TENSOR_GROWTH and holder.kind == "container":
        return K.TENSOR_LIST
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


def _severity(kind: str, own_rate: float, trend: Trend) -> str:
    if own_rate >= HIGH_BYTES_PER_STEP:
        return Severity.HIGH.value
    if kind in (K.AUTOGRAD_GRAPH, K.HOOKS, K.FIGURES, K.CACHE, K.TENSOR_LIST_GRAPH, K.BUFFER):
        return Severity.MEDIUM.value
    if kind == K.TENSOR_LIST and trend.slope >= 0.2:
        return Severity.MEDIUM.value
    return Severity.MEDIUM.value if own_rate >= MEDIUM_BYTES_PER_STEP else Severity.LOW.value


def _culprit(holder: HolderSeries, metric: Metric, slope: float, per_epoch: bool,
             steps_per_epoch: float) -> str:
    """Who holds it and what grows in it (rates in bytes are added with the measured rate)."""
    scale, per = (steps_per_epoch, "epoch") if per_epoch else (1.0, "step")
    label = display_name(holder)
    if metric.unit == "bytes":
        what = f"{holder.type_name}" if holder.kind != "buffer" else holder.type_name
        return f"{label} ({what}, its own size {format_bytes(slope * scale, signed=True)}/{per})"
    rate = f"+{slope * scale:.3g} {metric.unit}/{per}"
    if metric.kind == K.AUTOGRAD_GRAPH:
        return f"{label} (Tensor with grad_fn): autograd graph {rate}"
    if metric.kind == K.HOOKS:
        return f"{label} ({rate}, hook {holder.detail.get('hook', '?')})"
    if metric.kind == K.CACHE:
        return f"{label} ({rate}; maxsize=None)"
    if metric.kind == K.FIGURES:
        return f"matplotlib.pyplot: {holder.length[-1]:.0f} open figures ({rate})"
    item = holder.detail.get("item_type")
    what = f"{holder.type_name} of {item}" if item else holder.type_name
    return f"{label} ({what}, {rate})"


def display_name(holder: HolderSeries) -> str:
    """How a person names the holder: ``Trainer.outputs (via fit().trainer)``,
    ``local running_loss in main()``, ``global _ACTIVATIONS in model.py``."""
    label = holder.detail.get("label")
    if not label or label == holder.holder:
        return holder.holder
    if label.startswith(("local ", "global ", "closure ", "thread ", "torch ", "logging ",
                         "atexit", "weakref", "live threads", "gc.")):
        return label
    return f"{label} (via {holder.holder})"
