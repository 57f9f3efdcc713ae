"""The live detector's passes stay within their share of the run (three times
``--budget``): a pass the share cannot pay for waits, passes re-checking a suspect run
whatever it, and what the passes cost is in the trace and the printed cost line."""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from torchleak.analysis import load
from torchleak.analysis.verdict import overhead
import torchleak.live.detector as detector_module
from torchleak.live.detector import EARLY_STEPS, LIVE_BUDGETS, LiveDetector
from torchleak.live.engine import Monitor, MonitorOptions
from torchleak.trace.reader import open_trace
from torchleak.views.renderers.details import overhead_text

STEPS = 300
MAX_STEPS = 3000  # a leaky loop trains on (up to here) until its suspect is re-checked
Until = Callable[[LiveDetector, int], bool]


def _wait_for(detector: LiveDetector, done: Callable[[], bool]) -> None:
    """Hold the training loop until ``done`` (the detector's passes are counted, never
    timed: the deadline only ends a wait that would never end, and the test then fails
    on its counts)."""
    deadline = time.monotonic() + 60.0
    while not done() and detector.failed is None and time.monotonic() < deadline:
        time.sleep(0.005)


def _live_cost(folder: Path, budget: float, leaky: bool = False,
               until: Until | None = None) -> dict[str, float]:
    """Train a small loop with ``budget``, keeping every step's activations when
    ``leaky``; after each step wait while ``until(detector, step)`` is False. A leaky
    loop trains on past ``STEPS`` until it holds. Return the trace's record of the live
    detector's cost."""
    monitor = Monitor(MonitorOptions(out=folder, name="live-cost", quiet=True, budget=budget))
    monitor.start()
    detector = monitor._detector
    assert detector is not None
    try:
        model = torch.nn.Linear(8, 8)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        kept = []
        for step in range(1, MAX_STEPS + 1):
            loss = model(torch.randn(4, 8)).pow(2).mean()
            if leaky:
                kept.append(torch.randn(256, 256))
            opt.zero_grad()
            loss.backward()
            opt.step()
            if until is not None and not leaky:
                _wait_for(detector, lambda: until(detector, step))
            if step >= STEPS and (not leaky or until is None or until(detector, step)):
                break
    finally:
        monitor.stop("finished", 0, analyse=False)
    conn = sqlite3.connect(folder / "trace.sqlite")
    (value,) = conn.execute("SELECT value FROM meta WHERE key = 'live_detector'").fetchone()
    conn.close()
    return json.loads(value)


def _every_early_pass(detector: LiveDetector, step: int) -> bool:
    """The detector made a pass for every early step up to ``step``."""
    return detector.passes >= sum(1 for early in EARLY_STEPS if early <= step)


def _first_pass(detector: LiveDetector, step: int) -> bool:
    return step < EARLY_STEPS[0] or detector.passes >= 1


@pytest.fixture
def first_pass_free(monkeypatch: pytest.MonkeyPatch) -> None:
    """The first pass priced at nothing (as a run of the CLI, whose share counts the
    process's start-up, finds it): what the share does after it, in isolation."""
    monkeypatch.setattr(detector_module, "FIRST_PASS_SECONDS", 0.0)


@pytest.mark.parametrize("budget", [0.02, 1e-9])
def test_the_live_passes_take_no_more_than_their_share(tmp_path: Path, budget: float,
                                                        first_pass_free: None) -> None:
    cost = _live_cost(tmp_path, budget,
                      until=_every_early_pass if budget > 1e-9 else _first_pass)
    assert cost["share"] == pytest.approx(LIVE_BUDGETS * budget)
    early = sum(1 for step in EARLY_STEPS if step <= STEPS)
    # Passes re-checking a suspect run outside the share (a healthy loop inside this test
    # process, whose heap earlier tests share, was suspected once in a full suite).
    capped = cost["passes"] - cost["deciding_passes"]
    if budget > 1e-9:  # the share pays for every pass the run's growth asks for
        assert capped >= early, cost
    else:  # the first pass's CPU time buys no other in this run
        assert capped == 1, cost
    assert cost["seconds"] > 0 and 0 <= cost["deciding_seconds"] <= cost["seconds"]
    assert (cost["deciding_passes"] == 0) == (cost["deciding_seconds"] == 0), cost


def test_an_in_process_runs_first_pass_waits_for_its_share(tmp_path: Path) -> None:
    """In-process the share counts from the monitor's start: a first pass the share has
    not paid for yet waits (a run a fraction of a second long would otherwise print a
    share over the cap it states)."""
    cost = _live_cost(tmp_path, 1e-9)
    assert cost["passes"] == 0, cost


def test_passes_re_checking_a_suspect_run_whatever_the_share(tmp_path: Path,
                                                             first_pass_free: None) -> None:
    cost = _live_cost(tmp_path, 1e-9, leaky=True,
                      until=lambda detector, _step: detector.deciding > 0)
    assert cost["passes"] > 1 and 0 < cost["deciding_seconds"] <= cost["seconds"], cost
    assert 0 < cost["deciding_passes"] < cost["passes"], cost


def test_the_cost_line_says_what_the_live_detector_took(tmp_path: Path) -> None:
    cost = _live_cost(tmp_path, 0.01, until=_first_pass)
    with open_trace(tmp_path / "trace.sqlite") as opened:
        data = load(opened.conn)
    costs = overhead(data)
    assert costs["live_seconds"] == pytest.approx(cost["seconds"], abs=0.001)
    assert costs["live_passes"] == cost["passes"] and costs["live_cap"] == 0.03
    assert 0 < costs["live_share"] < 1
    # The share printed is over the wall time the cap counted against, not another span.
    assert costs["live_share"] == pytest.approx(
        (cost["seconds"] - cost["deciding_seconds"]) / cost["wall_seconds"], abs=1e-4)
    # ... and the probes' share over the same time (the process's, as their budget counts
    # it): recorded here, inside a test process older than the recording, the two spans
    # differ (one line once put 8.3% of the recording beside 1.3% of the process).
    # Both count from the process's start: the detector's is read as it stops, the
    # recorder's after it, within the recording (an order, never a tolerance on time).
    process = data.meta["process_seconds"]
    span = data.meta["end_time"] - data.meta["start_time"]
    assert cost["wall_seconds"] - 0.001 <= process <= cost["wall_seconds"] + span + 0.001
    assert costs["probe_share"] == pytest.approx(
        (costs["probe_seconds"] - costs["anchor_probe_seconds"]) / process, abs=1e-3)
    text = overhead_text(costs)
    assert (f"live detector {costs['live_seconds']:.3g} s of CPU in {cost['passes']} passes"
            in text), text
    assert "re-checking suspects, the rest" in text and "cap 3%" in text


def test_the_share_printed_is_never_over_the_cap(tmp_path: Path) -> None:
    """A fast loop that never waits: the cap binds, and the capped passes' CPU over the
    wall time (what the cost line prints) stays within it, the last pass included."""
    monitor = Monitor(MonitorOptions(out=tmp_path, name="cap", quiet=True, budget=0.01))
    monitor.start()
    detector = monitor._detector
    assert detector is not None
    detector._started = time.perf_counter()  # as in a fresh process: the share counts from here
    try:
        model = torch.nn.Linear(8, 8)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        # Until the cap has let a few passes through, however long a loaded machine takes
        # (the deadline only ends a loop that would never end; the test then fails on its
        # count).
        deadline = time.monotonic() + 600.0
        while detector.passes < 4 and time.monotonic() < deadline:
            loss = model(torch.randn(4, 8)).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
    finally:
        monitor.stop("finished", 0, analyse=False)
    with open_trace(tmp_path / "trace.sqlite") as opened:
        costs = overhead(load(opened.conn))
    assert costs["live_passes"] >= 4, costs
    assert costs["live_share"] <= costs["live_cap"], costs
