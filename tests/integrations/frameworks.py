"""Reading what a framework run left behind (its trace, its report, its loggers' files),
and the small training loop the in-process tests share."""

from __future__ import annotations

import csv
import json
import sqlite3
from pathlib import Path
from typing import Any


def report_json(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text())


def culprits(report: dict[str, Any]) -> list[str]:
    return [f["culprit"] for f in report["findings"] if f["severity"] in ("high", "medium")]


def trace_rows(trace: Path, sql: str) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(f"file:{trace}?mode=ro", uri=True)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


def csv_column(metrics: Path, column: str) -> list[float]:
    with metrics.open() as handle:
        return [float(row[column]) for row in csv.DictReader(handle) if row.get(column)]


def scalars(folder: Path) -> dict[str, list[tuple[int, float]]]:
    """Every scalar series in the TensorBoard event files under ``folder``."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    found: dict[str, list[tuple[int, float]]] = {}
    for events in folder.rglob("events.out.tfevents.*"):
        accumulator = EventAccumulator(str(events.parent))
        accumulator.Reload()
        for tag in accumulator.Tags()["scalars"]:
            found.setdefault(tag, []).extend((e.step, e.value) for e in accumulator.Scalars(tag))
    return found


def loop(steps: int, keep: list[Any] | None = None, features: int = 16) -> None:
    """A tiny training loop; ``keep`` gets every step's loss with its graph (a leak)."""
    import torch
    from torch import nn

    model = nn.Linear(features, 4)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(steps):
        loss = model(torch.randn(8, features)).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if keep is not None:
            keep.append(loss)
