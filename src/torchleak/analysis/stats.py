"""Robust trend statistics, stdlib only (the analysis must not need numpy).

- Theil-Sen slope: the median of pairwise slopes; insensitive to outliers and to the
  sawtooth of a healthy loop when applied to troughs.
- Mann-Kendall: a rank test for a monotone trend, with the tie correction (container
  lengths are full of ties). We use the normal approximation with continuity correction.
- troughs: the minimum per window. Comparing troughs at the same phase of successive
  windows removes per-iteration and validation sawtooth of a healthy loop.
"""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Sequence

_MAX_PAIRS_POINTS = 400  # Theil-Sen is O(n^2): subsample longer series deterministically


def theil_sen(x: Sequence[float], y: Sequence[float]) -> float:
    n = len(x)
    if n < 2:
        return 0.0
    idx = list(range(n))
    if n > _MAX_PAIRS_POINTS:
        rng = random.Random(0)
        idx = sorted(rng.sample(idx, _MAX_PAIRS_POINTS))
    xs = [x[i] for i in idx]
    ys = [y[i] for i in idx]
    slopes: list[float] = []
    # One comprehension per point (not a loop of appends): the pairs of 400 points are
    # 80,000 slopes, and every live pass and report computes a few of them.
    for a in range(len(xs) - 1):
        xa, ya = xs[a], ys[a]
        slopes += [(yb - ya) / (xb - xa) for xb, yb in zip(xs[a + 1:], ys[a + 1:])
                   if xb != xa]
    if not slopes:
        return 0.0
    slopes.sort()
    mid = len(slopes) // 2
    return slopes[mid] if len(slopes) % 2 else 0.5 * (slopes[mid - 1] + slopes[mid])


def mann_kendall_z(y: Sequence[float]) -> float:
    """Z score of the Mann-Kendall trend test (positive: increasing)."""
    n = len(y)
    if n < 3:
        return 0.0
    if n > _MAX_PAIRS_POINTS:
        step = n / _MAX_PAIRS_POINTS
        y = [y[int(i * step)] for i in range(_MAX_PAIRS_POINTS)]
        n = len(y)
    s = 0
    for i in range(n - 1):
        yi = y[i]
        for j in range(i + 1, n):
            d = y[j] - yi
            s += (d > 0) - (d < 0)
    ties = Counter(y).values()
    var = (n * (n - 1) * (2 * n + 5) - sum(t * (t - 1) * (2 * t + 5) for t in ties)) / 18.0
    if var <= 0:
        return 0.0
    if s > 0:
        return (s - 1) / math.sqrt(var)
    if s < 0:
        return (s + 1) / math.sqrt(var)
    return 0.0


def troughs(x: Sequence[float], y: Sequence[float], windows: int) -> tuple[list[float], list[float]]:
    """(x, min y) per window of equal step span; each trough keeps its own x."""
    if len(x) <= windows or windows < 2:
        return list(x), list(y)
    lo, hi = x[0], x[-1]
    width = (hi - lo) / windows or 1.0
    best: dict[int, tuple[float, float]] = {}
    for xi, yi in zip(x, y):
        k = min(int((xi - lo) / width), windows - 1)
        if k not in best or yi < best[k][1]:
            best[k] = (xi, yi)
    pts = [best[k] for k in sorted(best)]
    return [p[0] for p in pts], [p[1] for p in pts]


def mad(values: Sequence[float]) -> float:
    if not values:
        return 0.0
    med = median(values)
    return median([abs(v - med) for v in values])


def median(values: Sequence[float]) -> float:
    s = sorted(values)
    n = len(s)
    if n == 0:
        return 0.0
    return s[n // 2] if n % 2 else 0.5 * (s[n // 2 - 1] + s[n // 2])
