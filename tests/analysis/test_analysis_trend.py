"""trend.judge on synthetic series: every shape the verdict must tell apart (milliseconds)."""

from __future__ import annotations

import random

import pytest
from torchleak.analysis.signals import MIN_MEMORY_GROWTH
from torchleak.analysis.holders import MIN_ITEMS_GROWTH
from torchleak.analysis.thresholds import warmup_steps
from torchleak.analysis.trend import judge

MIB = 1024 * 1024
BASE = 200 * MIB
STEPS = 400
X = list(range(1, STEPS + 1))


def judge_memory(y: list[float], x: list[int] = X):
    return judge(x, y, warmup=warmup_steps(x[-1]), min_growth=MIN_MEMORY_GROWTH["main_uss"],
                 windows=20)


def judge_counts(y: list[float], x: list[int] = X):
    return judge(x, y, warmup=warmup_steps(x[-1]), min_growth=MIN_ITEMS_GROWTH, exact=True)


def noisy(values: list[float], sigma: float, seed: int = 0) -> list[float]:
    rng = random.Random(seed)
    return [v + rng.gauss(0, sigma) for v in values]


# Memory signals -----------------------------------------------------------------------
def test_linear_growth_is_growing_at_its_rate() -> None:
    rate = 100 * 1024
    trend = judge_memory(noisy([BASE + rate * s for s in X], 256 * 1024))
    assert trend.verdict == "growing"
    assert trend.slope == pytest.approx(rate, rel=0.1)


def test_a_staircase_per_epoch_is_growing_at_its_average_rate() -> None:
    epoch, per_epoch = 25, 1 * MIB
    trend = judge_memory([BASE + per_epoch * (s // epoch) for s in X])
    assert trend.verdict == "growing"
    assert trend.slope == pytest.approx(per_epoch / epoch, rel=0.25)


def test_a_sawtooth_with_flat_troughs_is_healthy() -> None:
    trend = judge_memory([BASE + (s % 10) * 4 * MIB for s in X])  # 36 MiB peaks
    assert trend.verdict == "healthy"


def test_a_sawtooth_on_a_slope_is_growing() -> None:
    trend = judge_memory([BASE + (s % 10) * 4 * MIB + 64 * 1024 * s for s in X])
    assert trend.verdict == "growing"
    assert trend.slope == pytest.approx(64 * 1024, rel=0.15)


def test_growth_that_stops_is_not_growing() -> None:
    # a cache filling for 150 steps (past the warm-up), then flat for 250
    y = [BASE + 256 * 1024 * min(s, 150) for s in X]
    assert judge_memory(noisy(y, 64 * 1024)).verdict in ("plateau", "healthy")


def test_a_late_fill_is_a_plateau() -> None:
    y = [BASE + 200 * 1024 * min(s, 220) for s in X]  # stops at 55% of the run
    trend = judge_memory(y)
    assert trend.verdict == "plateau", trend


def test_noise_without_trend_is_healthy() -> None:
    rng = random.Random(3)
    y = [BASE + rng.uniform(-20, 20) * MIB for _ in X]
    assert judge_memory(y).verdict == "healthy"


def test_growth_below_the_minimum_is_healthy() -> None:
    y = [BASE + 10 * 1024 * s for s in X]  # 4 MiB in 400 steps: real, but under 8 MiB
    trend = judge_memory(y)
    assert trend.verdict == "healthy"
    assert "threshold" in trend.reason


def test_growth_within_the_noise_is_healthy() -> None:
    rng = random.Random(5)
    y = [BASE + 30 * 1024 * s + rng.choice((0, 60 * MIB)) for s in X]
    assert judge_memory(y).verdict != "growing" or judge_memory(y).slope < 64 * 1024


def test_warm_up_growth_is_ignored() -> None:
    y = [BASE + (64 * MIB if s > 30 else 2 * MIB * s) for s in X]  # Adam state, H3/H4
    assert judge_memory(y).verdict == "healthy"


def test_too_few_points_are_insufficient() -> None:
    assert judge_memory([BASE + MIB * s for s in range(1, 8)], list(range(1, 8))).verdict == (
        "insufficient")


# The troughs of a real healthy run (Adam + batch-size ramp to step 60 of 260, memory
# flat from step 97; a transient dip of 12 MiB twice in the last 40%). main_uss, MiB.
RAMP_THEN_DIPS = [(28, 235.9), (39, 241.8), (54, 242.9), (71, 242.8), (77, 244.1), (86, 251.7),
                  (97, 258.4), (109, 258.4), (121, 258.4), (132, 258.4), (144, 258.4),
                  (156, 258.4), (170, 246.2), (179, 253.8), (191, 258.4), (212, 245.2),
                  (214, 252.8), (226, 258.5), (237, 258.5), (249, 258.5)]


def test_flat_memory_with_a_transient_dip_in_the_tail_is_not_growing() -> None:
    x = [s for s, _ in RAMP_THEN_DIPS]
    y = [v * MIB for _, v in RAMP_THEN_DIPS]
    trend = judge(x, y, warmup=26, min_growth=MIN_MEMORY_GROWTH["main_uss"], windows=20)
    assert trend.verdict != "growing", trend


def test_the_same_ramp_without_the_dips_is_not_growing() -> None:
    x = [s for s, _ in RAMP_THEN_DIPS]
    y = [min(v, 258.4) * MIB if s < 160 else 258.4 * MIB for s, v in RAMP_THEN_DIPS]
    trend = judge(x, y, warmup=26, min_growth=MIN_MEMORY_GROWTH["main_uss"], windows=20)
    assert trend.verdict != "growing", trend


# Exact counts (holder lengths, hooks, graph nodes) -------------------------------------
def test_a_list_appended_every_step_is_growing_by_one_per_step() -> None:
    trend = judge_counts([float(s) for s in X])
    assert trend.verdict == "growing"
    assert trend.slope == pytest.approx(1.0, rel=0.02)


def test_a_list_cleared_every_epoch_is_healthy() -> None:
    assert judge_counts([float(s % 25) for s in X]).verdict == "healthy"


def test_a_list_cleared_once_is_healthy() -> None:
    assert judge_counts([float(s if s < 200 else s - 200) for s in X]).verdict == "healthy"


@pytest.mark.parametrize("warmup", [50.0, 40.0])
def test_floors_that_rise_between_clears_are_growing(warmup: float) -> None:
    # emptied every 25 steps, but 2 items per epoch survive each clear: floors 4 -> 20
    y = [float(s % 25 + 2 * (s // 25)) for s in X]
    trend = judge(X, y, warmup=warmup, min_growth=MIN_ITEMS_GROWTH, exact=True)
    assert trend.verdict == "growing", trend


def test_a_per_epoch_staircase_of_counts_is_growing() -> None:
    trend = judge_counts([float(4 * (s // 25)) for s in X])
    assert trend.verdict == "growing"
    assert trend.slope == pytest.approx(4 / 25, rel=0.2)


def test_a_count_that_filled_early_is_a_plateau() -> None:
    trend = judge_counts([float(min(s, 200)) for s in X])  # a deque(maxlen=200) or a cache
    assert trend.verdict == "plateau"


def test_a_count_that_rose_twice_is_healthy() -> None:
    y = [0.0 if s < 100 else 50.0 if s < 300 else 100.0 for s in X]
    assert judge_counts(y).verdict == "healthy"


def test_a_small_rise_is_below_the_minimum() -> None:
    y = [float(min(3, s // 100)) for s in X]  # +3 items in all
    assert judge_counts(y).verdict == "healthy"


def test_counts_on_sparse_geometric_samples_still_grow() -> None:
    x = [3, 4, 6, 9, 13, 19, 28, 42, 63, 94, 141, 211, 316]  # the holder anchors alone
    trend = judge_counts([float(s) for s in x], x)
    assert trend.verdict == "growing"
    assert trend.slope == pytest.approx(1.0, rel=0.05)


def test_a_growing_trend_carries_its_margin_over_what_a_leak_needs() -> None:
    from torchleak.analysis.trend import judge

    steps = [float(s) for s in range(1, 1001)]
    barely = [s * 10_000.0 for s in steps]  # ~9.5 MiB over the window: 1.2x of 8 MiB
    clearly = [s * 40_000.0 for s in steps]
    near = judge(steps, barely, warmup=50, min_growth=8 * 2**20, windows=20)
    far = judge(steps, clearly, warmup=50, min_growth=8 * 2**20, windows=20)
    assert near.growing and far.growing
    assert near.margin is not None and 1.0 <= near.margin < 1.5
    assert far.margin is not None and far.margin > 4


def _shifted(after_rate: float) -> list[float]:
    """Flat-ish growth, a 120 MiB level shift over two samples at step 240 (a worker's
    copy-on-write pages made private by a collection in the parent), then ``after_rate``."""
    def at(x: int) -> float:
        shift = (60 * MIB if x >= 238 else 0) + (60 * MIB if x >= 241 else 0)
        return BASE + 60 * 1024 * x + shift + (after_rate * (x - 241) if x >= 241 else 0)

    return noisy([at(x) for x in X], 0.2 * MIB)


def test_growth_after_a_level_shift_is_growing_at_its_own_rate() -> None:
    trend = judge_memory(_shifted(80 * 1024))
    assert trend.growing, trend
    assert "level shift" in trend.reason
    assert trend.slope == pytest.approx(80 * 1024 + 60 * 1024, rel=0.3)


def test_a_level_shift_with_nothing_growing_after_it_is_not_growing() -> None:
    flat = noisy([BASE + (120 * MIB if x >= 240 else 0) for x in X], 0.2 * MIB)
    assert not judge_memory(flat).growing


# Steadiness (a growing signal with no holder is a leak only while it keeps its pace) ------
def _steady_of(y: list[float]) -> bool:
    from array import array

    from torchleak.analysis.series import Series
    from torchleak.analysis.signals import _steady

    trend = judge_memory(y)
    assert trend.verdict == "growing", trend
    return _steady(Series("main_uss", "bytes", array("d", X), array("d", y)), trend)


def test_a_straight_line_with_a_stall_stays_steady() -> None:
    # Native memory growing 96 KiB a step, paused for 50 steps while the C allocator
    # reuses what a census freed: still the same leak.
    rate, level, y = 96 * 1024, float(BASE), []
    for step in X:
        level += 0 if 250 <= step < 300 else rate
        y.append(level)
    assert _steady_of(noisy(y, 64 * 1024))


def test_a_rise_that_slows_down_is_not_steady() -> None:
    # Arenas filling up: fast at first, a fraction of that pace in the second half.
    y = [BASE + 40 * MIB * (1 - 0.993 ** s) for s in X]
    assert not _steady_of(noisy(y, 64 * 1024))
