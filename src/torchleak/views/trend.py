"""The straight line a view draws through a signal, and where it meets the memory limit.

The analysis owns the verdict; this only fits what the plots and the terminal show, so a
run without findings (still running, or analysis unavailable) still gets a rate per step.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

WARMUP_FRACTION = 0.2  # the first steps allocate optimizer state, caches: not a trend


@dataclass
class Trend:
    slope: float  # value units per step
    intercept: float
    r2: float
    first_step: int  # the fit covers first_step..last_step
    last_step: int

    def at(self, step: float) -> float:
        return self.intercept + self.slope * step

    def step_reaching(self, level: float) -> float | None:
        """The step where the line reaches ``level`` (None if it never does, going forward)."""
        if self.slope <= 0:
            return None
        return (level - self.intercept) / self.slope


def fit_trend(steps: Sequence[int], values: Sequence[float], slope: float | None = None) -> Trend | None:
    """Least squares over the post-warmup part; with ``slope`` given, fit only the offset."""
    start = int(len(values) * WARMUP_FRACTION) if len(values) >= 10 else 0
    xs = [float(s) for s in steps[start:]]
    ys = [float(v) for v in values[start:]]
    if len(xs) < 3 or xs[-1] == xs[0]:
        return None
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    if slope is None:
        slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx
    intercept = my - slope * mx
    ss_tot = sum((y - my) ** 2 for y in ys)
    ss_res = sum((y - (intercept + slope * x)) ** 2 for x, y in zip(xs, ys))
    r2 = 1.0 - ss_res / ss_tot if ss_tot > 0 else 0.0
    return Trend(slope, intercept, r2, int(xs[0]), int(xs[-1]))


def looks_like_growth(trend: Trend | None, values: Sequence[float]) -> bool:
    """A steady climb worth drawing when no analysis says so: linear and not negligible."""
    if trend is None or trend.slope <= 0 or not values:
        return False
    span = trend.slope * (trend.last_step - trend.first_step)
    level = max(abs(v) for v in values) or 1.0
    return trend.r2 >= 0.9 and span >= 0.05 * level


def is_flat(trend: Trend | None, values: Sequence[float]) -> bool:
    """Moved less than 1% of its level over the fitted span: say 'flat', not '+3 B/step'."""
    if trend is None or not values:
        return False
    level = max(abs(v) for v in values) or 1.0
    return abs(trend.slope * (trend.last_step - trend.first_step)) < 0.01 * level
