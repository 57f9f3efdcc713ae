from __future__ import annotations

import pytest

from torchleak.analysis.charts import downsample
from torchleak.errors import UsageError
from torchleak.system.limits import parse_size
from torchleak.units import format_bytes, format_count, format_duration, format_rate
from torchleak.views.renderers.svg import labelled_ticks, nice_ticks
from torchleak.views.sparkline import sparkline


def test_format_bytes_uses_binary_units() -> None:
    assert format_bytes(512) == "512 B"
    assert format_bytes(1536) == "1.5 KiB"
    assert format_bytes(300 * 1024 * 1024) == "300 MiB"
    assert format_bytes(262144, signed=True) == "+256 KiB"
    assert format_bytes(None) == "-"


def test_format_counts_rates_durations() -> None:
    assert format_count(12345) == "12,345"
    assert format_rate(1.0, "count") == "+1/step"
    assert format_rate(-2048.0, "bytes") == "-2 KiB/step"
    assert format_duration(4000) == "1h 06m"
    assert format_duration(5.25) == "5.2s"


def test_sparkline_shows_growth_and_flatness() -> None:
    assert sparkline([1, 2, 3, 4, 5, 6, 7, 8], 8) == "▁▂▃▄▅▆▇█"
    assert sparkline([5, 5, 5], 10) == "▁▁▁"
    assert len(sparkline(list(range(1000)), 40)) == 40
    assert sparkline([]) == ""


def test_downsample_keeps_spikes_and_bounds_points() -> None:
    steps = list(range(10_000))
    values = [0.0] * 10_000
    values[7777] = 99.0
    xs, ys = downsample(steps, values, limit=2000)
    assert len(xs) <= 2000
    assert 99.0 in ys and xs == sorted(xs)


@pytest.mark.parametrize("text, size", [("12GiB", 12 * 1024**3), ("800MB", 800 * 1000**2),
                                        ("1.5G", int(1.5 * 1024**3)),
                                        ("12884901888", 12884901888),
                                        ("2048 KiB", 2048 * 1024), ("2tib", 2 * 1024**4)])
def test_sizes_users_type(text: str, size: int) -> None:
    assert parse_size(text) == size


@pytest.mark.parametrize("text", ["", "twelve", "-1GiB", "12XB", "nan", "0", "4096"])
def test_bad_sizes_say_what_is_accepted(text: str) -> None:
    with pytest.raises(UsageError) as caught:
        parse_size(text)
    assert "\n" not in str(caught.value) and ("GiB" in str(caught.value) or "MiB" in str(caught.value))


def test_ticks_are_round_in_the_fitting_byte_unit() -> None:
    mib = 1024 * 1024
    ticks = labelled_ticks(200 * mib, 216 * mib, "bytes")
    assert [label for _, label in ticks][:3] == ["200 MiB", "205 MiB", "210 MiB"]
    assert nice_ticks(0, 60, 6) == [0, 10, 20, 30, 40, 50, 60]
