"""In-process (``torchleak.monitor()``, a framework callback, the pytest marker) the budget
counts from the monitor's start, not from the process's: a test late in a long pytest
session, or a cell late in a notebook, must not spend the minutes before it on probes, and
the share printed at the end is the share of the run it watched."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
import torch

from torchleak.analysis import load
from torchleak.analysis.verdict import overhead
from torchleak.live.engine import Monitor, MonitorOptions
from torchleak.trace.reader import open_trace


def _short_run(folder: Path, owns_process: bool) -> tuple[dict[str, object], dict]:
    """300 steps of a small model under a monitor; (the trace's meta, its cost figures)."""
    monitor = Monitor(MonitorOptions(out=folder, name="short", quiet=True,
                                     owns_process=owns_process))
    monitor.start()
    try:
        model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(),
                                    torch.nn.Linear(64, 4))
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for _ in range(300):
            loss = model(torch.randn(16, 32)).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
    finally:
        monitor.stop("finished", 0, analyse=False)
    conn = sqlite3.connect(folder / "trace.sqlite")
    meta = {key: json.loads(value) if value[:1] in "{[" else value
            for key, value in conn.execute("SELECT key, value FROM meta")}
    conn.close()
    with open_trace(folder / "trace.sqlite") as opened:
        costs = overhead(load(opened.conn))
    return meta, costs


def test_an_in_process_run_is_budgeted_from_the_monitors_start(tmp_path: Path) -> None:
    meta, costs = _short_run(tmp_path / "in-process", owns_process=False)
    span = float(meta["end_time"]) - float(meta["start_time"])
    # The wall time the budget counted against is the run's own (this test process had
    # lived seconds before it: importing torch alone takes that long).
    assert float(meta["process_seconds"]) <= span + 0.5, (meta["process_seconds"], span)
    runs = costs["probe_runs"]
    # A census (~0.1 s) is a fixed anchor a run of a fraction of a second never pays for.
    assert runs["census"] == 0, costs
    # The share printed is of the run it watched: the budgeted probes' seconds over the
    # run's own wall time, not the process's. (Whether the share kept under the budget
    # is the scheduler's rule, tested on its own clock; here it would decide on how busy
    # the machine was.)
    budgeted = costs["probe_seconds"] - costs["anchor_probe_seconds"]
    assert costs["probe_share"] * float(meta["process_seconds"]) == pytest.approx(
        max(0.0, budgeted), abs=2e-3), (costs, meta["process_seconds"])


def test_torchleak_run_counts_the_processs_start_up(tmp_path: Path) -> None:
    """``torchleak run`` owns its process: the program's ``import torch`` is the run's."""
    meta, _ = _short_run(tmp_path / "owned", owns_process=True)
    span = float(meta["end_time"]) - float(meta["start_time"])
    assert float(meta["process_seconds"]) > span + 1.0, (meta["process_seconds"], span)
