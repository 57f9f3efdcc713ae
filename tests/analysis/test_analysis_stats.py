"""torchleak.analysis.stats: the robust statistics the verdict stands on (milliseconds)."""

from __future__ import annotations

import math
import random

import pytest
from torchleak.analysis.stats import mad, mann_kendall_z, median, theil_sen, troughs


# Theil-Sen ------------------------------------------------------------------------------
@pytest.mark.parametrize("slope", [0.0, 1.0, -2.5, 262144.0, 1e-3])
def test_theil_sen_recovers_the_slope_of_a_line(slope: float) -> None:
    x = list(range(50))
    assert theil_sen(x, [7 + slope * v for v in x]) == pytest.approx(slope)


def test_theil_sen_ignores_outliers_that_least_squares_would_follow() -> None:
    x = list(range(100))
    y = [3.0 * v for v in x]
    for i in range(0, 100, 5):  # 20% wild points, all far above the line
        y[i] += 10_000
    assert theil_sen(x, y) == pytest.approx(3.0)


def test_theil_sen_uses_the_real_x_spacing() -> None:
    x = [1, 2, 4, 8, 16, 32, 64]  # geometric sampling, like the holder anchors
    assert theil_sen(x, [5 * v for v in x]) == pytest.approx(5.0)


def test_theil_sen_subsamples_long_series_and_stays_exact_on_a_line() -> None:
    x = list(range(5000))
    assert theil_sen(x, [0.5 * v - 3 for v in x]) == pytest.approx(0.5)


def test_theil_sen_on_noise_is_near_zero() -> None:
    rng = random.Random(1)
    x = list(range(300))
    assert abs(theil_sen(x, [rng.gauss(0, 1) for _ in x])) < 0.01


def test_theil_sen_degenerate_inputs() -> None:
    assert theil_sen([], []) == 0.0
    assert theil_sen([1], [5]) == 0.0
    assert theil_sen([3, 3, 3], [1, 2, 3]) == 0.0  # no two distinct x


def test_theil_sen_is_the_median_pairwise_slope() -> None:
    assert theil_sen([0, 1, 2], [0, 1, 4]) == pytest.approx(2.0)  # slopes 1, 2, 3
    # six slopes 1, 1.5, 2, 7/3, 3, 4: the mean of the middle two
    assert theil_sen([0, 1, 2, 3], [0, 1, 3, 7]) == pytest.approx((2 + 7 / 3) / 2)


# Mann-Kendall ---------------------------------------------------------------------------
def test_mann_kendall_known_value_for_five_rising_points() -> None:
    # S = 10, var = 5*4*15/18, continuity correction: (S - 1) / sqrt(var)
    assert mann_kendall_z([1, 2, 3, 4, 5]) == pytest.approx(9 / math.sqrt(50 / 3))


def test_mann_kendall_sign_follows_the_trend_and_is_symmetric() -> None:
    up = [0.1 * i + (0.05 if i % 2 else 0) for i in range(30)]
    down = [-v for v in up]
    assert mann_kendall_z(up) > 2.33
    assert mann_kendall_z(down) == pytest.approx(-mann_kendall_z(up))


def test_mann_kendall_is_zero_without_a_trend() -> None:
    assert mann_kendall_z([4, 4, 4, 4, 4, 4]) == 0.0  # all ties: no variance
    assert mann_kendall_z([1, 2]) == 0.0  # too short
    assert abs(mann_kendall_z([1, 3, 2, 3, 1, 2, 1, 3, 2])) < 1.0


def test_mann_kendall_tie_correction_raises_z_for_counts_full_of_ties() -> None:
    steps = [0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3]  # a staircase: a container growing per epoch
    n = len(steps)
    s = sum((steps[j] > steps[i]) - (steps[j] < steps[i])
            for i in range(n) for j in range(i + 1, n))
    untied = (s - 1) / math.sqrt(n * (n - 1) * (2 * n + 5) / 18)
    ties = 4 * 3 * 2 * 11  # four groups of three
    tied = (s - 1) / math.sqrt((n * (n - 1) * (2 * n + 5) - ties) / 18)
    assert mann_kendall_z(steps) == pytest.approx(tied)
    assert tied > untied


def test_mann_kendall_long_series_still_sees_a_trend() -> None:
    assert mann_kendall_z([i // 10 for i in range(3000)]) > 10


# troughs, median, MAD -----------------------------------------------------------------
def test_troughs_take_each_windows_minimum_at_its_own_x() -> None:
    x = list(range(1, 101))
    y = [v % 10 + (v // 10) * 100 for v in x]  # a sawtooth on a staircase
    tx, ty = troughs(x, y, 10)
    assert len(tx) == 10
    for a, b in zip(tx, ty):
        assert y[x.index(a)] == b
    assert ty == sorted(ty)


def test_troughs_of_a_flat_sawtooth_are_flat() -> None:
    x = list(range(200))
    y = [100 + (v % 10) * 5 for v in x]  # period 10, width 10 per window
    _, ty = troughs(x, y, 20)
    assert set(ty) == {100}


def test_troughs_keep_short_series_as_they_are() -> None:
    assert troughs([1, 2, 3], [5, 4, 6], 20) == ([1, 2, 3], [5, 4, 6])
    assert troughs([1, 2, 3], [5, 4, 6], 1) == ([1, 2, 3], [5, 4, 6])


def test_median_and_mad() -> None:
    assert median([]) == 0.0
    assert median([3, 1, 2]) == 2
    assert median([4, 1, 3, 2]) == 2.5
    assert mad([]) == 0.0
    assert mad([1, 1, 2, 2, 4, 6, 9]) == 1  # the classic example
