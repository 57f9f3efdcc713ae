"""The series every screen draws, with the line fitted to each, computed once.

A fitted line belongs to the series it was fitted to (the troughs after warm-up) and
spans only the steps it was fitted on. Census series are sparse: their last value
carries the step it was measured at.
"""

from __future__ import annotations

from torchleak.analysis.series import HolderSeries, RunData, Series
from torchleak.analysis.signals import TITLES, Judged
from torchleak.analysis.trend import Trend
from torchleak.report import Finding, Fit, HolderGrowth, Signal
from torchleak.vocab import Signal as S

POINTS = 1000  # points per drawn series (troughs and peaks of buckets survive)

_CHARTS = {
    S.MAIN_USS: ("main", "Main process memory (USS)", "main USS", True),
    "main_rss": ("main", "Main process memory (USS)", "main RSS", False),
    S.WORKERS_USS: ("workers", "DataLoader workers (USS, summed)", "workers USS", True),
    S.CUDA_ALLOCATED: ("cuda0", "CUDA memory, cuda:0", "CUDA allocated", True),
    S.CUDA_RESERVED_UNUSED: ("cuda0", "CUDA memory, cuda:0", "CUDA reserved unused", False),
    "tensor_bytes": ("tensors", "Live tensors", "tensor bytes", True),
    "tensors": ("tensor_count", "Live tensor count", "live tensors", True),
    "graph_nodes": ("tensor_count", "Live tensor count", "autograd nodes", False),
    "graph_bytes": ("graph", "Autograd graph retained", "graph bytes", True),
    "py_blocks": ("heap", "Python objects", "Python objects", True),
    "malloc_in_use": ("malloc", "C allocator", "malloc in use", True),
    "malloc_free": ("malloc", "C allocator", "malloc freed, kept", False),
}


def downsample(steps: list[float], values: list[float], limit: int = POINTS
               ) -> tuple[list[float], list[float]]:
    """At most ~``limit`` points, keeping each bucket's min and max so spikes survive."""
    if len(values) <= limit:
        return list(steps), list(values)
    buckets = max(1, limit // 2)
    out_s: list[float] = []
    out_v: list[float] = []
    n = len(values)
    for b in range(buckets):
        lo, hi = b * n // buckets, max(b * n // buckets + 1, (b + 1) * n // buckets)
        chunk = values[lo:hi]  # min/max of a slice, then its index: no key calls
        i_min = lo + chunk.index(min(chunk))
        i_max = lo + chunk.index(max(chunk))
        for i in sorted({i_min, i_max}):
            out_s.append(steps[i])
            out_v.append(values[i])
    return out_s, out_v


def _fit(trend: Trend | None) -> Fit | None:
    if trend is None or not trend.growing or trend.intercept is None:
        return None
    return Fit(trend.slope, trend.intercept, trend.first_step, trend.last_step)


def signal(name: str, series: Series, trend: Trend | None, plot: bool = True) -> Signal:
    chart, title, label, primary = _CHARTS.get(name, (name, TITLES.get(name, name), name, True))
    steps, values = downsample(series.x, series.y)
    return Signal(
        name=name, unit=series.unit, verdict=trend.verdict if trend else "not judged",
        slope_per_step=round(trend.slope, 3) if trend else None,
        start_value=series.y[0] if series.y else None, end_value=series.last,
        peak_value=series.peak, last_step=int(series.last_step or 0) or None,
        note=trend.reason if trend else "", label=label, chart=chart, chart_title=title,
        primary=primary, plot=plot, steps=steps, values=values, fit=_fit(trend))


def all_signals(data: RunData, judged: dict[str, Judged]) -> list[Signal]:
    found = []
    for name, series in data.memory.items():
        if series:
            j = judged.get(name)
            found.append(signal(name, series, j.trend if j else None))
    if data.rss:
        found.append(signal("main_rss", data.rss, None, plot=False))
    for name in ("tensor_bytes", "tensors", "graph_nodes", "graph_bytes"):
        series = data.census.get(name)
        if series:
            j = judged.get(name)
            found.append(signal(name, series, j.trend if j else None))
    for name in ("py_blocks", "malloc_in_use", "malloc_free"):
        series = data.heap.get(name)
        if series:
            found.append(signal(name, series, None))
    return found


def holder_signals(data: RunData, findings: list[Finding]) -> list[Signal]:
    """One chart per finding's holder: its own size (or length) next to who holds it."""
    found: list[Signal] = []
    for finding in findings:
        holder = data.holders.get(finding.holder_path or "")
        if holder is None or len(holder.steps) < 2:
            continue
        by_bytes = any(holder.bytes)
        values = holder.bytes if by_bytes else holder.length
        steps, points = downsample(holder.steps, values)
        found.append(Signal(
            name=f"holder:{holder.holder}", unit="bytes" if by_bytes else "count",
            verdict="growing", start_value=values[0], end_value=values[-1],
            peak_value=max(values), last_step=int(holder.steps[-1]),
            label="its own size" if by_bytes else "length", chart=f"holder:{holder.holder}",
            chart_title=f"Held by {finding.culprit.split(' (')[0]}", steps=steps,
            values=points))
    return found


def holder_growth(data: RunData, limit: int = 8) -> list[HolderGrowth]:
    """The holders that grew most between their first and last sample."""
    rows = []
    for h in data.holders.values():
        if len(h.steps) < 2 or h.kind in ("native", "dataloader"):
            continue
        grew_bytes, grew_length = h.bytes[-1] - h.bytes[0], h.length[-1] - h.length[0]
        if grew_bytes > 0 or grew_length > 0:
            rows.append(_growth(h))
    rows.sort(key=lambda g: (g.last_bytes - g.first_bytes, g.last_length - g.first_length),
              reverse=True)
    return rows[:limit]


def _growth(h: HolderSeries) -> HolderGrowth:
    from torchleak.analysis.holders import display_name

    return HolderGrowth(h.holder, display_name(h), h.kind, h.type_name, int(h.steps[0]),
                        int(h.steps[-1]), len(h.steps), h.length[0], h.length[-1],
                        h.bytes[0], h.bytes[-1])
