"""Growth no holder explains sends the holder walk to look again: a few full walks from
the next boundary on, spaced out, whatever the budget has left. Holders the live detector
suspects are re-measured within the budget."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from torchleak.live.engine import Monitor, MonitorOptions
from torchleak.record.plan import CONFIRM_SAMPLES, HUNT_MIN_GAP, HUNT_SPREAD, HUNT_WALKS
from torchleak.record.session import Recorder

STEPS, HUNT_AT = 400, 300


def _walk_steps(folder: Path, steps: int, at: int, ask: Callable[[Recorder], None],
                budget: float, reason: str) -> list[int]:
    """Train a loop where nothing grows, ask the recorder for something at step ``at``,
    and return the steps of the holder walks recorded with ``reason``."""
    monitor = Monitor(MonitorOptions(out=folder, name=reason, quiet=True, budget=budget))
    monitor.start()
    try:
        model = torch.nn.Linear(8, 8)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for step in range(1, steps + 1):
            loss = model(torch.randn(4, 8)).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            if step == at:
                assert monitor.recorder is not None
                ask(monitor.recorder)
    finally:
        monitor.stop("finished", 0, analyse=False)
    conn = sqlite3.connect(folder / "trace.sqlite")
    walks = [s for (s,) in conn.execute(
        "SELECT step FROM holder_walks WHERE reason = ? ORDER BY step", (reason,))]
    conn.close()
    return walks


def test_a_hunt_walks_again_spaced_out(tmp_path: Path) -> None:
    walks = _walk_steps(tmp_path, STEPS, HUNT_AT, Recorder.hunt, 0.01, "hunt")
    assert len(walks) == HUNT_WALKS, walks
    assert walks[0] == HUNT_AT + 1  # the next boundary
    for before, after in zip(walks, walks[1:]):
        assert after - before == max(HUNT_MIN_GAP, before // HUNT_SPREAD)


@pytest.mark.parametrize("budget, confirmed", [(0.5, CONFIRM_SAMPLES), (1e-6, 0)])
def test_a_live_suspicion_is_re_measured_within_the_budget(tmp_path: Path, budget: float,
                                                           confirmed: int) -> None:
    # The live detector asks for re-measures of what it suspects after each pass; they are
    # the quick re-measure's runs and come out of its share of the budget. Nothing grows
    # in this loop: these are the only confirmations asked for.
    walks = _walk_steps(tmp_path, 200, 100, lambda r: r.confirm(["model"]), budget, "confirm")
    assert len(walks) == confirmed, walks


def test_a_boundary_asks_the_plan_only_at_its_gates(tmp_path: Path) -> None:
    # A fast loop pays for every call at its boundaries: the plan is asked whether a probe
    # is due only once its gate (a step or a time) is reached, or when the run asked for
    # something (a hunt, here at step 300: its first walk is still at the next boundary).
    asked: list[int] = []

    def count(recorder: Recorder) -> None:
        assert recorder.plan is not None
        due = recorder.plan.due
        recorder.plan.due = lambda step, start: asked.append(step) or due(step, start)  # type: ignore[method-assign]
        recorder.hunt()

    # A budget too small for any scheduled probe: only the steps decide (the anchors, the
    # hunt's walks and the boundary after each run), never the machine's speed.
    walks = _walk_steps(tmp_path, 2 * STEPS, HUNT_AT, count, 1e-9, "hunt")
    assert walks[0] == HUNT_AT + 1
    assert HUNT_AT + 1 in asked
    assert len(asked) < 30, asked  # of the 500 boundaries after the hunt was asked
