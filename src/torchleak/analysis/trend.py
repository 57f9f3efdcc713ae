"""Decide whether one series grows without bound, and how fast.

Method (all thresholds named below):
1. Drop the warm-up: steps <= ``warmup`` (warm-up growth, lazy optimizer state).
2. Compare like with like. Memory series are noisy and saw-toothed, so we take the
   trough (minimum) of each of ``windows`` equal spans (a healthy loop's sawtooth). Exact counts (container
   lengths) are judged by ``_judge_counts`` instead (no statistics needed).
3. Mann-Kendall on the troughs must show an increasing trend: Z >= ``Z_GROWING``
   (one-sided p < 0.01).
4. The Theil-Sen slope times the span must exceed ``min_growth`` and 3 MADs of the
   troughs' residuals (noise, variable batch sizes).
5. Plateau test on the tail (the last ``TAIL_FRACTION`` of troughs): if it makes no new
   high above the troughs before it (by ``PLATEAU_RATIO`` of what the slope predicts), or
   its own slope is below ``PLATEAU_RATIO`` of the overall slope with a small range,
   growth has stopped: a cache filled to its bound, an allocator plateau, warm-up that
   ended late, a transient dip and its recovery. Unless one jump made most of the growth
   (a level shift: a DataLoader worker's copy-on-write pages made private at once by a
   collection in the parent, a new training stage) and the troughs after it, judged on
   their own, still grow: then the growth after the shift is what is reported.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from collections.abc import Callable, Sequence

from torchleak.analysis.stats import mad, mann_kendall_z, median, theil_sen, troughs

Z_GROWING = 2.33
TAIL_FRACTION = 0.4
PLATEAU_RATIO = 0.25
MIN_POINTS = 5
MIN_SPAN_STEPS = 10
MIN_RISES = 3
STEP_SPREAD = 0.35  # two flat levels: spread on each side at most this much of the gap


@dataclass
class Trend:
    verdict: str  # growing | healthy | plateau | insufficient
    slope: float = 0.0  # units per step
    z: float = 0.0
    start: float = 0.0
    end: float = 0.0
    first_step: float = 0.0
    last_step: float = 0.0
    reason: str = ""
    intercept: float | None = None  # of the fitted line through the troughs
    margin: float | None = None  # growth over what growth must reach (threshold, noise)

    @property
    def growing(self) -> bool:
        return self.verdict == "growing"

    def at(self, step: float) -> float | None:
        return None if self.intercept is None else self.intercept + self.slope * step


def judge(x: Sequence[float], y: Sequence[float], *, warmup: float, min_growth: float,
          windows: int = 0, exact: bool = False) -> Trend:
    pts = [(a, b) for a, b in zip(x, y) if a > warmup]
    need = MIN_RISES + 1 if exact else MIN_POINTS  # counts: enough points for the rises
    if len(pts) < need or pts[-1][0] - pts[0][0] < MIN_SPAN_STEPS:
        return Trend("insufficient", reason=f"{len(pts)} samples after warm-up")
    px, py = [p[0] for p in pts], [p[1] for p in pts]
    if exact:
        return _judge_counts(px, py, min_growth)
    tx, ty = troughs(px, py, windows or len(px))
    if len(tx) < 3:
        return Trend("healthy", reason="emptied regularly")
    z = mann_kendall_z(ty)
    slope = theil_sen(tx, ty)
    trend = Trend("healthy", slope, z, ty[0], ty[-1], tx[0], tx[-1],
                  intercept=median([b - slope * a for a, b in zip(tx, ty)]))
    if z < Z_GROWING:
        trend.reason = f"no monotone trend (MK z={z:.2f})"
        return trend
    if slope <= 0:
        trend.reason = f"troughs do not rise (Theil-Sen slope {slope:.3g})"
        return trend
    growth = slope * (tx[-1] - tx[0])
    noise = 3 * mad([b - slope * a for a, b in zip(tx, ty)])
    trend.margin = growth / max(min_growth, noise, 1e-9)
    if growth < max(min_growth, noise):
        trend.reason = f"growth {growth:.3g} below threshold {max(min_growth, noise):.3g}"
        return trend
    after = _after_level_shift(tx, ty, min_growth)
    if after is not None:  # growth after a level shift: its rate, not the one jump's
        return after
    if _plateaued(tx, ty, slope):
        trend.verdict, trend.reason = "plateau", "growth stopped in the tail"
        return trend
    if _one_step(ty):
        trend.verdict, trend.reason = "plateau", "one step up, flat before and after"
        return trend
    trend.verdict, trend.reason = "growing", f"MK z={z:.2f}, {slope:.3g}/step"
    return trend


SHIFT_SHARE = 0.5  # one rise this share of the whole growth: a level shift
SHIFT_SAMPLES = 2  # ... made between at most this many consecutive troughs


def _after_level_shift(tx: list[float], ty: list[float], min_growth: float) -> Trend | None:
    """The troughs after a level shift, judged on their own, when they still grow."""
    rises = [(ty[i + n] - ty[i], i + n) for n in range(1, SHIFT_SAMPLES + 1)
             for i in range(len(ty) - n)]
    jump, end = max(rises)
    if jump < SHIFT_SHARE * (ty[-1] - ty[0]) or len(tx) - end < MIN_POINTS:
        return None
    after = judge(tx[end:], ty[end:], warmup=-math.inf, min_growth=min_growth,
                  windows=len(tx) - end)
    if not after.growing:
        return None
    after.reason = f"grows after a level shift at step {tx[end]:.0f}: {after.reason}"
    return after


def _one_step(ty: list[float]) -> bool:
    """A single jump between two flat levels (a second training stage, a late unfreeze,
    an index built once) is a new level, not growth: some split leaves every trough after
    it above every trough before it, by a gap that dwarfs the spread on either side (one
    trough may sit on the transition)."""
    n = len(ty)
    for k in range(3, n - 3):
        before, after = ty[:k], ty[k + 1:]
        gap = min(after) - max(before)
        if gap <= 0:
            continue
        spread = max(max(before) - min(before), max(after) - min(after))
        if spread <= STEP_SPREAD * gap:
            return True
    return False


def _judge_counts(x: list[float], y: list[float], min_growth: float) -> Trend:
    """Exact counts (container lengths, hook counts, graph nodes) need no statistics: a
    count that never goes down, rose at least ``MIN_RISES`` times by ``min_growth`` in
    all, and still rises in the last ``TAIL_FRACTION`` of the span, grows without bound.
    A count that was emptied (dropped below half) is judged by the floors it returns to."""
    segments = _segments(x, y)
    if len(segments) == 2:
        return Trend("healthy", reason="emptied during the run")
    if len(segments) >= 3:
        # The first segment may start mid-epoch (warm-up cut): its first value is no floor.
        usable = segments[1:] if len(segments) >= 4 else segments
        floors = [min(seg, key=lambda p: p[1]) for seg in usable]
        x, y = [p[0] for p in floors], [p[1] for p in floors]
    trend = Trend("healthy", theil_sen(x, y), 0.0, y[0], y[-1], x[0], x[-1])
    rises = [i for i in range(1, len(y)) if y[i] > y[i - 1]]
    if any(y[i] < y[i - 1] for i in range(1, len(y))):
        trend.z = mann_kendall_z(y)
        if trend.z < Z_GROWING:
            trend.reason = f"not monotone (MK z={trend.z:.2f})"
            return trend
    elif len(rises) < MIN_RISES:
        trend.reason = f"rose {len(rises)} times"
        return trend
    growth = y[-1] - y[0]
    if growth < min_growth:
        trend.reason = f"grew by {growth:.0f} only"
        return trend
    tail_start = x[-1] - TAIL_FRACTION * (x[-1] - x[0])
    before = max((v for a, v in zip(x, y) if a < tail_start), default=y[0])
    if y[-1] - before < PLATEAU_RATIO * TAIL_FRACTION * growth:
        # A few stragglers after filling up (a per-example dict reaching the dataset size).
        trend.verdict, trend.reason = "plateau", "stopped growing in the last 40% of the run"
        return trend
    # The average rate over the window: Theil-Sen reads a per-epoch staircase as ~0.
    trend.slope = growth / max(1.0, x[-1] - x[0])
    trend.verdict = "growing"
    trend.reason = f"rose {len(rises)} times, never emptied, +{growth:.0f} since step {x[0]:.0f}"
    return trend


def _segments(x: list[float], y: list[float]) -> list[list[tuple[float, float]]]:
    segments: list[list[tuple[float, float]]] = [[]]
    prev = None
    for a, b in zip(x, y):
        if prev is not None and b < 0.5 * prev:
            segments.append([])
        segments[-1].append((a, b))
        prev = b
    return segments


def _plateaued(tx: list[float], ty: list[float], slope: float) -> bool:
    """Growth has stopped when the tail makes no new high above what came before it (a
    dip and its recovery are not growth), or when its own slope and range are small."""
    k = max(3, int(len(tx) * TAIL_FRACTION))
    if len(tx) - k < 2:
        return False
    tail_x, tail_y = tx[-k:], ty[-k:]
    expected_rise = slope * (tail_x[-1] - tail_x[0])
    if max(tail_y) - max(ty[:-k]) < PLATEAU_RATIO * expected_rise:
        return True
    return theil_sen(tail_x, tail_y) < PLATEAU_RATIO * slope and (
        max(tail_y) - min(tail_y) < 0.5 * expected_rise)


def first_growing_step(x: Sequence[float], y: Sequence[float], *, min_growth: float,
                       exact: bool, warmup: Callable[[float], float],
                       windows: int = 20) -> int | None:
    """The online rule replayed: the first step at which ``judge`` says growing using only
    the samples up to that step (at most ~120 checkpoints, so long runs stay cheap)."""
    stride = max(1, len(x) // 120)
    for end in range(MIN_POINTS, len(x) + stride, stride):
        end = min(end, len(x))
        step = x[end - 1]
        trend = judge(x[:end], y[:end], warmup=warmup(step), min_growth=min_growth,
                      windows=windows, exact=exact)
        if trend.growing:
            return int(step)
    return None
