"""The measured memory signals: is each one growing, and the findings for growth that no
holder names (DataLoader workers, CUDA fragmentation, native memory, allocator retention,
or growth nothing explains yet).

A steady leak is a leak even when nothing is named: the verdict follows the measured
growth of the process, not the confidence of the holder walk.
"""

from __future__ import annotations

from dataclasses import dataclass

from torchleak.analysis.advice import WORKER_STATE_ADVICE, advice_for
from torchleak.analysis.causes import classify
from torchleak.analysis.holders import bounded_by_construction
from torchleak.analysis.series import RunData, Series
from torchleak.analysis.stats import theil_sen, troughs
from torchleak.analysis.thresholds import HIGH_BYTES_PER_STEP, MEDIUM_BYTES_PER_STEP, MIB, warmup_steps
from torchleak.analysis.trend import Trend, judge
from torchleak.report import Finding
from torchleak.units import format_bytes
from torchleak.vocab import FindingKind as K
from torchleak.vocab import Severity
from torchleak.vocab import Signal as S

MIN_MEMORY_GROWTH = {S.MAIN_USS: 8 * MIB, S.WORKERS_USS: 8 * MIB,
                     S.CUDA_ALLOCATED: 8 * MIB, S.CUDA_RESERVED_UNUSED: 64 * MIB}
TITLES = {"tensors": "live tensors", "graph_nodes": "autograd nodes",
          S.MAIN_USS: "main process memory (USS)",
          S.WORKERS_USS: "DataLoader worker memory (USS, summed)",
          S.CUDA_ALLOCATED: "CUDA allocated", S.CUDA_RESERVED_UNUSED: "CUDA reserved but unallocated"}
# Census series are sparse (anchors + budget), judged only when a long run gave enough.
MIN_CENSUS_GROWTH = {"tensors": 16.0, "graph_nodes": 256.0}
WINDOWS = 20


@dataclass
class Judged:
    series: Series
    trend: Trend


def judge_signals(data: RunData) -> dict[str, Judged]:
    warmup = warmup_steps(data.steps)
    judged = {}
    for name, series in data.memory.items():
        if series:
            judged[name] = Judged(series, judge(series.x, series.y, warmup=warmup,
                                                windows=WINDOWS,
                                                min_growth=MIN_MEMORY_GROWTH.get(name, 8 * MIB)))
    for name, min_growth in MIN_CENSUS_GROWTH.items():
        series = data.census.get(name)
        if series is not None and len(series.x) >= 5:
            judged[name] = Judged(series, judge(series.x, series.y, warmup=warmup,
                                                windows=WINDOWS, min_growth=min_growth))
    return judged


def signal_findings(data: RunData, judged: dict[str, Judged],
                    named: list[Finding]) -> list[Finding]:
    """Findings for measured growth: workers, fragmentation, and growth no holder names."""
    found = []
    named_signals = {f.signal for f in named if f.serious}
    for name, j in judged.items():
        if name == S.WORKERS_USS and not j.trend.growing:
            copying = copy_on_read(data, j.series)
            if copying is not None:
                found.append(worker_finding(data, copying))
            continue
        if not j.trend.growing:
            continue
        if name == S.WORKERS_USS:
            found.append(worker_finding(data, j.trend))
        elif name == S.CUDA_RESERVED_UNUSED:
            found.append(_fragmentation(data, j.trend))
        elif name in MIN_CENSUS_GROWTH:
            if not named:
                found.append(_census_finding(name, j.trend))
        elif name not in named_signals and not explained_by_bounded(
                data, j.trend.slope, j.trend.first_step, j.trend.last_step):
            found.append(unnamed_finding(data, name, j))
    return found


BOUNDED_SHARE = 0.5  # holders that stop by themselves and grew this share of a signal explain it


RETAINED_SHARE = 1 / 3  # ... a third when the growth is freed memory the allocator keeps


def explained_by_bounded(data: RunData, slope: float, first_step: float,
                         last_step: float) -> bool:
    """A buffer filled and flushed again and again, or one bounded by construction,
    explains the growth of the process; freed memory the C allocator keeps of such a
    buffer's cycles can reach a few of its peaks before it is reused."""
    growth = max(1.0, slope * max(1.0, last_step - first_step))
    bounded = bounded_growth(data, first_step)
    if bounded >= BOUNDED_SHARE * growth:
        return True
    retained = classify(data, slope, first_step, last_step).kind
    return retained == K.ALLOCATOR_RETENTION and bounded >= RETAINED_SHARE * growth


def bounded_growth(data: RunData, since: float) -> float:
    """Bytes swung since ``since`` by holders that stop by themselves: bounded by
    construction (``deque(maxlen=…)``, ``lru_cache(maxsize=…)``) or emptied during the run
    (a list cleared at the end of its epoch). Growth of the process they explain is a
    bounded cost, not a leak."""
    total = 0.0
    for holder in data.holders.values():
        lengths = list(holder.length)
        if not (bounded_by_construction(holder) or _emptied(lengths)) or len(lengths) < 2:
            continue
        # Its swing since then: a buffer filled and flushed again and again leaves at most
        # its peak in the allocator's heap, whenever the samples caught it.
        window = [b for s, b in zip(holder.steps, holder.bytes) if s >= since] or [
            holder.bytes[-1]]
        total += max(0.0, max(window) - min(window))
    return total


def _steady(series: Series, trend: Trend) -> bool:
    """The second half of the window grew at least half as fast as the first: not a rise
    that slows down (arenas or buffers filling up). Each half's rate is the Theil-Sen slope
    of its troughs: a straight line reads 1.0 whatever its sampling, and a stall of some
    steps (freed memory reused for a while) moves a median of slopes little."""
    pts = [(x, y) for x, y in zip(series.x, series.y) if trend.first_step <= x <= trend.last_step]
    if len(pts) < 8:
        return True
    mid = (trend.first_step + trend.last_step) / 2
    first = _half_rate([p for p in pts if p[0] <= mid])
    second = _half_rate([p for p in pts if p[0] > mid])
    return not (first > 0 and second < STEADY_RATIO * first)


STEADY_RATIO = 0.5  # the second half's rate below this share of the first: slowing down
HALF_TROUGHS = 8  # troughs per half (a sawtooth's peaks say nothing of the level)


def _half_rate(pts: list[tuple[float, float]]) -> float:
    tx, ty = troughs([x for x, _ in pts], [y for _, y in pts], HALF_TROUGHS)
    return theil_sen(tx, ty)


def unnamed_finding(data: RunData, signal: str, j: Judged) -> Finding:
    """Growth no holder names: called a leak when steady, with what the heap shows."""
    trend = j.trend
    cause = classify(data, trend.slope, trend.first_step, trend.last_step)
    kind = cause.kind or K.MEMORY
    severity = Severity.LOW
    # Borderline growth ("a longer run decides") stays a note: with no holder to name, a
    # margin this thin is what a noisy sawtooth's drift or the allocator's wandering high-
    # water mark gives in a short run, and the verdict flipped between runs of one script.
    borderline = trend.margin is not None and trend.margin < BORDERLINE
    if _steady(j.series, trend) and trend.slope >= MEDIUM_BYTES_PER_STEP and not borderline:
        severity = Severity.HIGH if trend.slope >= 64 * HIGH_BYTES_PER_STEP else Severity.MEDIUM
    title = TITLES.get(signal, signal)
    what = {K.NATIVE_MEMORY: "native memory outside Python objects and tensors",
            K.ALLOCATOR_RETENTION: "freed memory kept by the C allocator"}.get(kind, "no named holder")
    advice = advice_for(kind, script=str(data.meta.get("script") or "SCRIPT"))
    evidence = [f"{title}: {format_bytes(trend.start)} -> {format_bytes(trend.end)} "
                f"({trend.reason})", *cause.evidence]
    if trend.margin is not None:
        evidence.append(f"growth {trend.margin:.2g}x what a leak needs (the minimum growth "
                        "and 3 MADs of noise)" + (": borderline, a longer run decides"
                                                   if trend.margin < BORDERLINE else ""))
    switch = switch_on(data, trend.first_step, trend.last_step)
    if switch is not None and not signal.startswith("cuda_reserved"):
        mechanism, label = switch
        advice = advice_for(mechanism)
        evidence.insert(0, f"{label} was on at every step boundary while {title} grew")
        return Finding(kind=kind, culprit=f"{label}: on while {title} grows", severity=
                       severity.value, fix=advice.fix, pattern=advice.pattern.anchor,
                       pattern_title=advice.pattern.title, signal=signal, cause=cause.kind,
                       evidence=evidence, margin=_rounded(trend.margin))
    natives = _native_handles(data)
    if kind == K.NATIVE_MEMORY and natives:
        evidence.append("native handles in reach of your code: " + "; ".join(natives))
    return Finding(kind=kind, culprit=f"{title}: {what}", severity=severity.value,
                   fix=advice.fix, pattern=advice.pattern.anchor,
                   pattern_title=advice.pattern.title, signal=signal, cause=cause.kind,
                   evidence=evidence, margin=_rounded(trend.margin))


BORDERLINE = 1.5  # a growth margin below this is shown as borderline


def _rounded(margin: float | None) -> float | None:
    return None if margin is None else round(margin, 2)


# Torch switches that keep memory per step, in the order they are named (anomaly mode
# keeps tracebacks only as long as the graphs: named last).
_SWITCHES = ("autocast", "profiler", "saved_tensor_hooks", "anomaly_mode")


def switch_on(data: RunData, start: float, end: float) -> tuple[str, str] | None:
    """(mechanism, label) of a torch switch that was on at most full walks while a signal
    grew from ``start`` to ``end``."""
    walks = [w for w in data.full_walks if start <= w <= end]
    if len(walks) < 2:
        return None
    for mechanism in _SWITCHES:
        holder = data.holders.get(f"torch switch {mechanism}")
        if holder is None:
            continue
        on = sum(1 for step in holder.steps if start <= step <= end)
        if on >= max(2, 0.5 * len(walks)):
            return mechanism, str(holder.detail.get("label") or mechanism)
    return None


def _native_handles(data: RunData) -> list[str]:
    found = []
    for holder in data.holders.values():
        if holder.kind == "native":
            library = holder.detail.get("library")
            label = holder.detail.get("label") or holder.holder
            found.append(f"{label} ({holder.type_name}{' ' + library if library else ''})")
    return found[:5]


COPY_SHARE = 0.2  # workers copied this share of what they can copy: not noise
KEPT_SHARE = 0.95  # and still hold this share of their highest level at the end


def _emptied(lengths: list[float]) -> bool:
    """Dropped below half of what it held, and never grew much past that since: a buffer
    flushed again and again (the samples may catch it full at the end), not a list
    cleared once and then kept for good."""
    top, drop = 0.0, None
    for i, length in enumerate(lengths):
        if length < 0.5 * top:
            drop = i
        top = max(top, length)
    if drop is None:
        return False
    before = max(lengths[:drop])
    return max(lengths[drop:]) <= 1.5 * before


def copy_on_read(data: RunData, series: Series) -> Trend | None:
    """Workers un-sharing a big Python dataset grow fast, then slower as fewer pages are
    left to copy, and level off once each holds its own copy: a rank test on a few sweeps
    can miss that shape, and a fast loop copies most of it during warm-up. The bound they
    can reach (the dataset's size times the workers) does not flip with scheduling:
    copying a real share of it since the workers started, and staying near the highest
    level to the end, is the leak (each worker keeps a private copy of the dataset)."""
    loaders = [h for h in data.holders.values() if h.kind == "dataloader"]
    if not loaders or len(series.x) < 4:
        return None
    detail = loaders[-1].detail
    big = detail.get("big_attributes") or {}
    dataset_bytes = sum(float(v.get("bytes") or 0) for v in big.values() if isinstance(v, dict))
    workers = detail.get("num_workers") if isinstance(detail.get("num_workers"), int) else 0
    bound = dataset_bytes * workers
    pts = list(zip(series.x, series.y))
    if not bound or len(pts) < 3:
        return None
    # The end: the median of the last three sweeps (one may catch a worker as it exits).
    end = sorted(y for _, y in pts[-3:])[1]
    growth = end - min(y for _, y in pts)
    if growth < max(MIN_MEMORY_GROWTH[S.WORKERS_USS], COPY_SHARE * bound) or (
            end < KEPT_SHARE * max(y for _, y in pts)):
        return None
    span = max(1.0, pts[-1][0] - pts[0][0])
    return Trend("growing", growth / span, 0.0, pts[0][1], end, pts[0][0], pts[-1][0],
                 reason=f"grew {format_bytes(growth)} since the workers started; each can "
                        f"copy {format_bytes(dataset_bytes)} of Python objects ({workers} "
                        f"workers: {format_bytes(bound)})")


def worker_finding(data: RunData, trend: Trend) -> Finding:
    advice = advice_for(K.WORKER_MEMORY)
    loaders = [h for h in data.holders.values() if h.kind == "dataloader"]
    where, fix = "", ""
    if loaders:
        detail = loaders[-1].detail
        big = detail.get("big_attributes") or {}
        small = detail.get("small_containers") or {}
        dataset = detail.get("dataset", "Dataset")
        parts = [f"{dataset}.{attr} ({v.get('type')} of {v.get('length'):,} {v.get('item_type')})"
                 for attr, v in big.items() if isinstance(v, dict)]
        filled = [f"{dataset}.{attr} ({v.get('type')} of {v.get('length')} in this process)"
                  for attr, v in small.items() if isinstance(v, dict)]
        if parts:
            where = " - " + ", ".join(parts) + " touched by workers (copy-on-read)"
        elif filled:
            # Nothing big to un-share: what grows is state each worker keeps for itself.
            first = next(attr for attr, v in small.items() if isinstance(v, dict))
            advice = advice_for(WORKER_STATE_ADVICE, first)
            where = (f" - each worker's own copy of {', '.join(filled)} may be what grows "
                     "(worker memory is not walked)")
        else:
            where = f" - {dataset}"
        if detail.get("persistent_workers"):
            where += "; persistent_workers=True keeps it across epochs"
            fix = advice.fix + ", or turn persistent_workers off so workers restart each epoch"
    sev = Severity.HIGH if trend.slope >= HIGH_BYTES_PER_STEP else Severity.MEDIUM
    return Finding(kind=K.WORKER_MEMORY, culprit=f"DataLoader workers{where}", severity=sev.value,
                   fix=fix or advice.fix, pattern=advice.pattern.anchor,
                   pattern_title=advice.pattern.title, signal=S.WORKERS_USS,
                   evidence=[f"summed worker USS {format_bytes(trend.start)} -> "
                             f"{format_bytes(trend.end)} ({trend.reason})"])


def _fragmentation(data: RunData, trend: Trend) -> Finding:
    advice = advice_for(K.FRAGMENTATION)
    extra = data.cuda_extra
    evidence = [f"CUDA reserved-but-unallocated {format_bytes(trend.start)} -> "
                f"{format_bytes(trend.end)} ({trend.reason})"]
    if extra:
        evidence.append(f"inactive split blocks {format_bytes(extra.get('inactive_split'))}, "
                        f"allocation retries {extra.get('num_alloc_retries', 0):.0f}")
    return Finding(kind=K.FRAGMENTATION, culprit="CUDA caching allocator: reserved but unused "
                   "memory grows (fragmentation)", severity=Severity.LOW.value, fix=advice.fix,
                   pattern=advice.pattern.anchor, pattern_title=advice.pattern.title,
                   signal=S.CUDA_RESERVED_UNUSED, evidence=evidence)


def _census_finding(name: str, trend: Trend) -> Finding:
    """Live tensors or autograd nodes grow with no named holder: C++ or unnamed owners."""
    advice = advice_for(K.TENSORS)
    unit = "live tensors" if name == "tensors" else "autograd nodes"
    severity = Severity.MEDIUM if name == "graph_nodes" or trend.slope >= 0.5 else Severity.LOW
    return Finding(kind=K.TENSOR_GROWTH if name == "tensors" else K.AUTOGRAD_GRAPH,
                   culprit=f"{unit} +{trend.slope:.3g}/step, not reachable from a name in "
                           "your code", severity=severity.value, fix=advice.fix,
                   pattern=advice.pattern.anchor, pattern_title=advice.pattern.title,
                   signal=name, objects_per_step=round(trend.slope, 4),
                   evidence=[f"census {unit}: {trend.start:.0f} -> {trend.end:.0f} "
                             f"({trend.reason})"])
