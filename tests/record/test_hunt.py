"""Growth no holder explains sends the holder walk to look again: a few full walks from
the next boundary on, spaced out, whatever the budget has left."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
import torch

from torchleak.live.engine import Monitor, MonitorOptions
from torchleak.record.plan import CONFIRM_SAMPLES, HUNT_MIN_GAP, HUNT_SPREAD, HUNT_WALKS

STEPS, HUNT_AT = 400, 300


def test_a_hunt_walks_again_spaced_out(tmp_path: Path) -> None:
    monitor = Monitor(MonitorOptions(out=tmp_path, name="hunt", quiet=True))
    monitor.start()
    try:
        model = torch.nn.Linear(8, 8)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for step in range(1, STEPS + 1):
            loss = model(torch.randn(4, 8)).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            if step == HUNT_AT:
                assert monitor.recorder is not None
                monitor.recorder.hunt()
    finally:
        monitor.stop("finished", 0, analyse=False)
    conn = sqlite3.connect(tmp_path / "trace.sqlite")
    walks = [s for (s,) in conn.execute(
        "SELECT step FROM holder_walks WHERE kind = 'full' AND reason = 'hunt' ORDER BY step")]
    conn.close()
    assert len(walks) == HUNT_WALKS, walks
    assert walks[0] == HUNT_AT + 1  # the next boundary
    for before, after in zip(walks, walks[1:]):
        assert after - before == max(HUNT_MIN_GAP, before // HUNT_SPREAD)


@pytest.mark.parametrize("budget, confirmed", [(0.05, CONFIRM_SAMPLES), (1e-6, 0)])
def test_a_live_suspicion_is_re_measured_within_the_budget(tmp_path: Path, budget: float,
                                                           confirmed: int) -> None:
    # The live detector asks for re-measures of what it suspects after each pass; they are
    # the quick re-measure's runs and come out of its share of the budget.
    monitor = Monitor(MonitorOptions(out=tmp_path, name="confirm", quiet=True, budget=budget))
    monitor.start()
    try:
        model = torch.nn.Linear(8, 8)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for step in range(1, 201):
            loss = model(torch.randn(4, 8)).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            if step == 100:  # nothing here grows: these are the only confirmations asked
                assert monitor.recorder is not None
                monitor.recorder.confirm(["model"])
    finally:
        monitor.stop("finished", 0, analyse=False)
    conn = sqlite3.connect(tmp_path / "trace.sqlite")
    runs = conn.execute("SELECT COUNT(*) FROM holder_walks WHERE reason = 'confirm'").fetchone()
    conn.close()
    assert runs[0] == confirmed, runs
