"""The live detector's passes stay within their share of the run (three times
``--budget``): a pass the share cannot pay for waits, passes re-checking a suspect run
whatever it, and what the passes cost is in the trace and the printed cost line."""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path

import pytest
import torch

from torchleak.analysis import load
from torchleak.analysis.verdict import overhead
from torchleak.live.detector import EARLY_STEPS, LIVE_BUDGETS
from torchleak.live.engine import Monitor, MonitorOptions
from torchleak.trace.reader import open_trace
from torchleak.views.renderers.details import overhead_text

STEPS = 300


def _live_cost(folder: Path, budget: float, leaky: bool = False) -> dict[str, float]:
    """Train a small loop (slowed a little so the detector keeps up) with ``budget``,
    keeping every step's activations when ``leaky``; return the trace's record of the
    live detector's cost."""
    monitor = Monitor(MonitorOptions(out=folder, name="live-cost", quiet=True, budget=budget))
    monitor.start()
    try:
        model = torch.nn.Linear(8, 8)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        kept = []
        for _ in range(STEPS):
            loss = model(torch.randn(4, 8)).pow(2).mean()
            if leaky:
                kept.append(torch.randn(256, 256))
            opt.zero_grad()
            loss.backward()
            opt.step()
            time.sleep(0.002)
    finally:
        monitor.stop("finished", 0, analyse=False)
    conn = sqlite3.connect(folder / "trace.sqlite")
    (value,) = conn.execute("SELECT value FROM meta WHERE key = 'live_detector'").fetchone()
    conn.close()
    return json.loads(value)


@pytest.mark.parametrize("budget", [0.02, 1e-9])
def test_the_live_passes_take_no_more_than_their_share(tmp_path: Path, budget: float) -> None:
    cost = _live_cost(tmp_path, budget)
    assert cost["share"] == pytest.approx(LIVE_BUDGETS * budget)
    early = sum(1 for step in EARLY_STEPS if step <= STEPS)
    if budget > 1e-9:  # the share pays for every pass the run's growth asks for
        assert cost["passes"] >= early, cost
    else:  # the first pass's CPU time buys no other in this run
        assert cost["passes"] == 1, cost
    assert cost["seconds"] > 0 and cost["deciding_seconds"] == 0


def test_passes_re_checking_a_suspect_run_whatever_the_share(tmp_path: Path) -> None:
    cost = _live_cost(tmp_path, 1e-9, leaky=True)
    assert cost["passes"] > 1 and 0 < cost["deciding_seconds"] <= cost["seconds"], cost


def test_the_cost_line_says_what_the_live_detector_took(tmp_path: Path) -> None:
    cost = _live_cost(tmp_path, 0.01)
    with open_trace(tmp_path / "trace.sqlite") as opened:
        costs = overhead(load(opened.conn))
    assert costs["live_seconds"] == pytest.approx(cost["seconds"], abs=0.001)
    assert costs["live_passes"] == cost["passes"] and costs["live_cap"] == 0.03
    assert 0 < costs["live_share"] < 1
    text = overhead_text(costs)
    assert (f"live detector {costs['live_seconds']:.3g} s of CPU in {cost['passes']} passes"
            in text), text
    assert "re-checking suspects, the rest" in text and "cap 3%" in text
