"""Read a trace into plain series: what the detectors work on, live or after the run."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Series:
    name: str
    unit: str
    x: list[float] = field(default_factory=list)  # steps
    y: list[float] = field(default_factory=list)


@dataclass
class HolderSeries:
    holder: str
    kind: str
    type_name: str
    steps: list[int] = field(default_factory=list)
    length: list[float] = field(default_factory=list)
    bytes: list[float] = field(default_factory=list)
    tensors: list[float] = field(default_factory=list)
    grad_fn_tensors: list[float] = field(default_factory=list)
    graph_nodes: list[float] = field(default_factory=list)
    detail: dict[str, Any] = field(default_factory=dict)


@dataclass
class RunData:
    steps: int = 0
    step_seconds: float | None = None  # median wall time of a step
    memory: dict[str, Series] = field(default_factory=dict)
    holders: dict[str, HolderSeries] = field(default_factory=dict)
    census: dict[str, Series] = field(default_factory=dict)
    marks: list[tuple[int, str]] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)
    cuda_total: int | None = None

    def epoch_ends(self) -> list[int]:
        """Steps at which an epoch ended: 'epoch' marks, else validation ends."""
        epochs = [s for s, name in self.marks if name == "epoch"]
        if len(epochs) >= 2:
            return epochs
        return [s for s, name in self.marks if name == "validation_end"]


def load(conn: sqlite3.Connection) -> RunData:
    data = RunData()
    data.meta = {k: _json(v) for k, v in conn.execute("SELECT key, value FROM meta")}
    _load_steps(conn, data)
    _load_workers(conn, data)
    _load_cuda(conn, data)
    _load_holders(conn, data)
    _load_census(conn, data)
    data.marks = [(int(s), str(n)) for s, n in conn.execute("SELECT step, name FROM marks ORDER BY t")]
    return data


def _json(value: str) -> Any:
    try:
        return json.loads(value)
    except ValueError:
        return value


def _load_steps(conn: sqlite3.Connection, data: RunData) -> None:
    uss = Series("main_uss", "bytes")
    durations = []
    for step, value, duration in conn.execute("SELECT step, uss, duration_ms FROM steps ORDER BY step"):
        if value is not None:
            uss.x.append(step)
            uss.y.append(float(value))
        if duration is not None:
            durations.append(duration)
        data.steps = step
    data.memory[uss.name] = uss
    if durations:
        durations.sort()
        data.step_seconds = durations[len(durations) // 2] / 1000.0


def _load_workers(conn: sqlite3.Connection, data: RunData) -> None:
    rows = conn.execute("SELECT step, t, pid, uss FROM process_samples WHERE role='worker' "
                        "ORDER BY t").fetchall()
    if not rows:
        return
    # Sum the latest sample of each live worker at each sampled step.
    series = Series("workers_uss", "bytes")
    by_step: dict[int, dict[int, int]] = {}
    for step, _t, pid, uss in rows:
        by_step.setdefault(step, {})[pid] = uss or 0
    for step in sorted(by_step):
        series.x.append(step)
        series.y.append(float(sum(by_step[step].values())))
    data.memory[series.name] = series


def _load_cuda(conn: sqlite3.Connection, data: RunData) -> None:
    alloc, frag = Series("cuda_allocated", "bytes"), Series("cuda_reserved_unused", "bytes")
    for step, a, r, total in conn.execute(
            "SELECT step, allocated, reserved, total FROM cuda_samples WHERE device=0 ORDER BY step"):
        alloc.x.append(step)
        alloc.y.append(float(a or 0))
        frag.x.append(step)
        frag.y.append(float((r or 0) - (a or 0)))
        data.cuda_total = total
    if alloc.x:
        data.memory[alloc.name] = alloc
        data.memory[frag.name] = frag


def _full_walk_steps(conn: sqlite3.Connection) -> list[int]:
    try:
        return [int(r[0]) for r in conn.execute(
            "SELECT step FROM holder_walks WHERE kind='full' ORDER BY step")]
    except sqlite3.OperationalError:  # traces written before the table existed
        return []


def _load_holders(conn: sqlite3.Connection, data: RunData) -> None:
    query = ("SELECT step, holder, kind, type_name, length, bytes, tensors, grad_fn_tensors, "
             "graph_nodes, detail FROM holders ORDER BY step")
    for step, holder, kind, type_name, length, nbytes, tensors, gfn, nodes, detail in conn.execute(query):
        series = data.holders.get(holder)
        if series is None:
            series = data.holders[holder] = HolderSeries(holder, kind, type_name or "")
        series.steps.append(step)
        series.length.append(float(length or 0))
        series.bytes.append(float(nbytes or 0))
        series.tensors.append(float(tensors or 0))
        series.grad_fn_tensors.append(float(gfn or 0))
        series.graph_nodes.append(float(nodes or 0))
        if detail:
            series.detail = {**series.detail, **_json(detail)}
    _prepend_empty(data, _full_walk_steps(conn))


def _prepend_empty(data: RunData, walks: list[int]) -> None:
    """Empty containers are not recorded: a holder missing from a full walk before its
    first sample was empty (or not created yet), so it starts from zero there. This is
    what lets a list filled once per epoch show its first rise."""
    import bisect

    for series in data.holders.values():
        if not series.steps:
            continue
        i = bisect.bisect_left(walks, series.steps[0])
        if i == 0 or series.kind not in ("container", "hooks", "cache", "figures"):
            continue
        series.steps.insert(0, walks[i - 1])
        for values in (series.length, series.bytes, series.tensors, series.grad_fn_tensors,
                       series.graph_nodes):
            values.insert(0, 0.0)


def _load_census(conn: sqlite3.Connection, data: RunData) -> None:
    names = ("tensors", "tensor_bytes", "grad_fn_tensors", "graph_nodes", "graph_bytes")
    for name in names:
        data.census[name] = Series(name, "count" if "bytes" not in name else "bytes")
    for row in conn.execute(f"SELECT step, {', '.join(names)} FROM census ORDER BY step"):
        for name, value in zip(names, row[1:]):
            data.census[name].x.append(row[0])
            data.census[name].y.append(float(value or 0))
