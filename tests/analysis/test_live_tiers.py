"""Suspected or called: the rules that decide when a live finding may warn, each on the
series shape it exists for (a per-step leak, a cache filled once, a buffer flushed every
150 steps, a list emptied at the epoch's end, a per-epoch leak, a model grown in stages).

The series are what the recorder writes for these loops; the end-to-end twins run real
training scripts (tests/record/test_record_live_trust.py)."""

from __future__ import annotations

from torchleak.analysis.confirm import MIN_DOUBLING_STEPS, confirmation
from torchleak.analysis.live_calls import live_outcome
from torchleak.analysis.series import HolderSeries, RunData
from torchleak.report import Finding, Report
from torchleak.trace.judgements import Judgement


def _data(steps: int, marks: list[tuple[int, str, str | None]] = ()) -> RunData:  # type: ignore[assignment]
    return RunData(steps=steps, marks=list(marks))


def _finding(per_epoch: bool = False) -> Finding:
    return Finding(kind="tensor_list", culprit="history", severity="high", fix="",
                   holder_path="main().history", per_epoch=per_epoch)


def _call(data: RunData, steps: list[int], values: list[float], per_epoch: bool = False,
          onset: float = 3.0) -> str | None:
    return confirmation(data, _finding(per_epoch), [float(s) for s in steps], values, onset,
                        exact=True)


def test_a_per_step_leak_with_no_epochs_is_called_once_the_run_doubled() -> None:
    steps = list(range(1, 400))
    values = [float(s) for s in steps]
    first = 3 + 2 * MIN_DOUBLING_STEPS  # the growth began at step 3
    assert _call(_data(first - 1), steps, values) is None  # suspected only
    why = _call(_data(first), steps, values)
    assert why is not None and "doubled" in why


def test_a_leak_that_starts_late_is_called_once_its_own_span_doubled() -> None:
    steps = list(range(1, 800))
    values = [float(max(0, s - 400)) for s in steps]
    first = 400 + 2 * MIN_DOUBLING_STEPS
    assert _call(_data(first - 1), steps, values, onset=400.0) is None
    assert _call(_data(first), steps, values, onset=400.0) is not None


def test_a_buffer_flushed_every_150_steps_is_never_called() -> None:
    for now in range(20, 1200, 7):
        steps = list(range(1, now + 1))
        values = [float(s % 150) for s in steps]
        assert _call(_data(now), steps, values) is None, now


def test_a_cache_that_filled_once_is_not_called() -> None:
    steps = list(range(1, 600))
    values = [float(min(s, 120)) for s in steps]
    for now in range(20, 600, 5):
        assert _call(_data(now), steps[:now], values[:now]) is None, now


def test_a_list_emptied_at_the_epoch_end_is_not_called_and_a_kept_one_is() -> None:
    ends = [(e, "validation_end", None) for e in range(40, 400, 40)]
    steps = list(range(1, 400))
    cleared = [float(s % 40) for s in steps]
    kept = [float(s) for s in steps]
    for now in range(45, 400, 5):
        assert _call(_data(now, ends), steps[:now], cleared[:now]) is None, now
    why = _call(_data(65, ends), steps[:65], kept[:65])
    assert why is not None and "epoch end at step 40" in why


def test_growth_that_stops_just_after_the_epoch_end_is_not_called() -> None:
    """A batch-size ramp that ends at step 55 in 40-step epochs: growth must go on for
    half an epoch past the boundary, and still at its pace in the last quarter."""
    ends = [(e, "validation_end", None) for e in range(40, 400, 40)]
    steps = list(range(1, 400))
    ramp = [float(min(s, 55)) for s in steps]
    for now in range(45, 400, 3):
        assert _call(_data(now, ends), steps[:now], ramp[:now]) is None, now


def test_a_per_epoch_leak_is_called_at_its_second_epoch_end() -> None:
    ends = [(e, "validation_end", None) for e in range(25, 400, 25)]
    steps = list(range(1, 400))
    values = [float(s // 25) for s in steps]
    assert _call(_data(40, ends), steps[:40], values[:40], per_epoch=True) is None
    assert _call(_data(70, ends), steps[:70], values[:70], per_epoch=True) is not None


def test_a_model_grown_in_three_stages_is_not_called() -> None:
    steps = list(range(1, 700))
    values = [float(sum(s >= stage for stage in (60, 120, 180))) * 100 + 100 for s in steps]
    for now in range(20, 700, 5):
        assert _call(_data(now), steps[:now], values[:now]) is None, now


def test_a_dataloader_first_epoch_waits_for_its_end() -> None:
    """Within a DataLoader's first epoch a growing list may still be cleared when it ends."""
    started = [(0, "loader_begin", None)]
    steps = list(range(1, 400))
    values = [float(s) for s in steps]
    assert _call(_data(399, started), steps, values) is None
    with_epochs = started + [(100, "loader_epoch", "0"), (200, "loader_epoch", "0")]
    assert _call(_data(160, with_epochs), steps[:160], values[:160]) is not None


def test_the_end_says_which_live_calls_it_withdrew_and_why() -> None:
    data = RunData(steps=300)
    holder = HolderSeries("main().cache", "container", "dict")
    for step, length in ((10, 10), (50, 50), (120, 120), (200, 120), (300, 120)):
        holder.add(step, length, length * 1024, 0, 0, 0)
    data.holders["main().cache"] = holder
    data.live = Judgement("live", 90, None, "leak", tier="called", calls=[
        {"step": 60, "culprit": "cache", "key": "container:main().cache", "why": "x"},
        {"step": 80, "culprit": "kept", "key": "tensor_list:main().kept", "why": "past"}])
    final = Report(verdict="leak", steps=300, findings=[Finding(
        kind="tensor_list", culprit="kept", severity="high", fix="", holder_path="main().kept")])
    outcome = live_outcome(data, final)
    assert outcome is not None and outcome["tier"] == "called"
    withdrawn, kept = outcome["calls"]
    assert kept["kept"] is True and kept["why"] == "past"
    assert withdrawn["kept"] is False
    assert withdrawn["why"].startswith("the warning at step 60 was withdrawn: `cache` stopped "
                                       "growing at step 120 and held 120 KiB")


def test_an_emptied_holder_is_called_released() -> None:
    data = RunData(steps=400)
    holder = HolderSeries("history", "container", "list")
    for step, length in ((10, 10), (200, 200), (399, 399), (400, 0)):
        holder.add(step, length, length * 512, length, 0, 0)
    data.holders["history"] = holder
    data.live = Judgement("live", 180, None, "leak", tier="called", calls=[
        {"step": 170, "culprit": "history", "key": "tensor_list:history", "why": "doubled"}])
    outcome = live_outcome(data, Report(verdict="no_leak", steps=400))
    assert outcome is not None
    assert "`history` was emptied at step 400 after holding 399 items (released, not leaked)" \
        in outcome["calls"][0]["why"]
