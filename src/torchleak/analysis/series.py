"""A trace read into plain series: what the detectors work on, live or after the run.

``RunDataBuilder`` reads the trace through ``torchleak.trace.rows``, only the rows it has
not seen, so the live detector pays for what is new and the end-of-run analysis streams
the file. Every series keeps at most ``MAX_POINTS`` points: past that, neighbouring
points merge into their trough (the lower one), which is what leak detection compares,
while the series' peak and last value are kept exactly. Memory therefore stays bounded
however long the run is.
"""

from __future__ import annotations

import json
import sqlite3
from array import array
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from torchleak.trace import rows, tables
from torchleak.trace.judgements import Judgement, judgement
from torchleak.trace.reader import read_meta
from torchleak.units import number

MAX_POINTS = 2048
MAX_HOLDER_POINTS = 512  # per holder: many holders, each judged on its troughs
MAX_HOLDERS = 2000
MAX_MARKS = 5000
MAX_EVENTS = 200


@dataclass
class Series:
    name: str
    unit: str
    # Packed doubles: 8 bytes a point, so thousands of series stay small.
    x: array[float] = field(default_factory=lambda: array("d"))  # steps
    y: array[float] = field(default_factory=lambda: array("d"))
    peak: float | None = None
    last: float | None = None
    last_step: float | None = None
    max_points: int = MAX_POINTS

    def add(self, step: float, value: float) -> None:
        self.peak = value if self.peak is None else max(self.peak, value)
        self.last, self.last_step = value, step
        self.x.append(step)
        self.y.append(value)
        if len(self.x) > self.max_points:
            self._halve()

    def _halve(self) -> None:
        """Merge neighbours into their trough: half the points, same troughs."""
        keep = _troughs_of_pairs(self.y)
        self.x = array("d", (self.x[i] for i in keep))
        self.y = array("d", (self.y[i] for i in keep))

    def __bool__(self) -> bool:
        return bool(self.x)


@dataclass
class HolderSeries:
    holder: str
    kind: str
    type_name: str
    steps: array[float] = field(default_factory=lambda: array("d"))
    length: array[float] = field(default_factory=lambda: array("d"))
    bytes: array[float] = field(default_factory=lambda: array("d"))
    tensors: array[float] = field(default_factory=lambda: array("d"))
    grad_fn_tensors: array[float] = field(default_factory=lambda: array("d"))
    graph_nodes: array[float] = field(default_factory=lambda: array("d"))
    detail: dict[str, Any] = field(default_factory=dict)

    def add(self, step: float, length: float, nbytes: float, tensors: float, gfn: float,
            nodes: float) -> None:
        if self.steps and step == self.steps[-1]:
            # Two samples at one step (a quick re-measure and a walk, the last boundary and
            # the end-of-run walk): the later one is what the holder holds now.
            for values, value in ((self.length, length), (self.bytes, nbytes),
                                  (self.tensors, tensors), (self.grad_fn_tensors, gfn),
                                  (self.graph_nodes, nodes)):
                values[-1] = value
            return
        for values, value in ((self.steps, step), (self.length, length), (self.bytes, nbytes),
                              (self.tensors, tensors), (self.grad_fn_tensors, gfn),
                              (self.graph_nodes, nodes)):
            values.append(value)
        if len(self.steps) > MAX_HOLDER_POINTS:
            self._halve()

    def _halve(self) -> None:
        keep = _troughs_of_pairs(self.length)
        for name in ("steps", "length", "bytes", "tensors", "grad_fn_tensors", "graph_nodes"):
            values = getattr(self, name)
            setattr(self, name, array("d", (values[i] for i in keep)))


def _troughs_of_pairs(values: array[float]) -> list[int]:
    """The lower index of each neighbouring pair (and a last odd one): half the points,
    every trough kept."""
    keep = [i if values[i] <= values[i + 1] else i + 1 for i in range(0, len(values) - 1, 2)]
    if len(values) % 2:
        keep.append(len(values) - 1)
    return keep


@dataclass
class RunData:
    steps: int = 0
    step_seconds: float | None = None  # median wall time of a step
    memory: dict[str, Series] = field(default_factory=dict)  # main_uss, workers_uss, cuda_*
    rss: Series = field(default_factory=lambda: Series("main_rss", "bytes"))
    heap: dict[str, Series] = field(default_factory=dict)  # py_blocks, malloc_in_use, ...
    holders: dict[str, HolderSeries] = field(default_factory=dict)
    census: dict[str, Series] = field(default_factory=dict)
    breakdown: dict[str, Series] = field(default_factory=dict)
    marks: list[tuple[int, str, str | None]] = field(default_factory=list)
    events: list[tuple[float, int, str, str, str]] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)
    live: Judgement | None = None  # the live detector's latest judgement, as stored
    full_walks: list[int] = field(default_factory=list)
    monitor_ms: list[float] = field(default_factory=list)  # a bounded sample, for the median
    monitor_ms_total: float = 0.0  # torchleak's time at every boundary, summed
    step_ms_total: float = 0.0  # the steps' own wall time (ours excluded), summed
    cuda_total: int | None = None
    cuda_extra: dict[str, float] = field(default_factory=dict)  # retries, ooms, inactive split

    def epoch_ends(self) -> list[int]:
        """Steps at which an epoch ended: 'epoch' marks, else validation ends, else the
        steps at which the DataLoader iterated most often started again."""
        epochs = [s for s, name, _ in self.marks if name == "epoch"]
        if len(epochs) >= 2:
            return epochs
        ends = [s for s, name, _ in self.marks if name == "validation_end"]
        if ends:
            return ends
        loaders: dict[str | None, list[int]] = {}
        for s, name, value in self.marks:
            if name == "loader_epoch":
                loaders.setdefault(value, []).append(s)
        return max(loaders.values(), key=len, default=[])

    def loader_started(self) -> bool:
        """The training reads a DataLoader: its first epoch may end with a ``.clear()``."""
        return any(name == "loader_begin" for _s, name, _v in self.marks)

    def current(self, signal: str) -> float:
        series = self.memory.get(signal)
        return float(series.last) if series and series.last is not None else 0.0


class RunDataBuilder:
    """Builds a ``RunData`` from a trace and keeps it up to date with new rows."""

    def __init__(self) -> None:
        self.data = RunData()
        self._cursor: dict[str, int] = {}
        self._durations: deque[float] = deque(maxlen=4096)
        self._monitor: deque[float] = deque(maxlen=4096)
        self._sweep: tuple[float, float, dict[int, float]] | None = None  # workers' sweep
        self._columns: dict[str, list[str]] = {}  # this trace's tables' columns, once read

    def update(self, conn: sqlite3.Connection) -> RunData:
        """Read the rows new since the last update (``conn``: always the same trace's)."""
        data = self.data
        data.meta = read_meta(conn)
        data.live = judgement(conn, "live", report=False)
        with rows.columns_known(self._columns):
            self._steps(conn)
            self._workers(conn)
            self._heap(conn)
            self._cuda(conn)
            self._holders(conn)
            self._census(conn)
            self._marks_events(conn)
        if self._durations:
            ordered = sorted(self._durations)
            data.step_seconds = ordered[len(ordered) // 2] / 1000.0
        data.monitor_ms = list(self._monitor)
        return data

    def _after(self, key: str) -> int:
        return self._cursor.get(key, 0)

    def _steps(self, conn: sqlite3.Connection) -> None:
        """The memory read at the steps that read it, and the steps' times: their sums,
        and the latest ones for the medians (a fast loop writes thousands of steps a
        second: only the rows that carry a reading, or a recent time, come into Python)."""
        data = self.data
        uss = data.memory.setdefault("main_uss", Series("main_uss", "bytes"))
        after = self._after("steps")
        last, step_ms, monitor_ms = rows.step_totals(conn, after)
        if last <= after:
            return
        for step, rss, used in rows.step_readings(conn, after):
            if not isinstance(step, int):
                continue  # a row that is not ours: skipped, never fatal
            for target, raw in ((uss, used), (data.rss, rss)):
                if number(raw) is not None:
                    target.add(step, float(raw))
        for duration, monitor in rows.recent_step_times(conn, after, self._durations.maxlen
                                                       or 0):
            if number(duration) is not None:
                self._durations.append(float(duration))
            if number(monitor) is not None:
                self._monitor.append(float(monitor))
        data.step_ms_total += step_ms
        data.monitor_ms_total += monitor_ms
        self._cursor["steps"] = last
        data.steps = last

    def _workers(self, conn: sqlite3.Connection) -> None:
        """One point per sampler sweep (rows of a sweep share their time): the sum of the
        workers' USS, each worker once."""
        series = self.data.memory.get("workers_uss")
        last = self._after("workers")
        for rowid, row in rows.read_new(conn, tables.PROCESS_SAMPLES, last, role="worker"):
            last, step, t, pid, uss = rowid, row.step, row.t, row.pid, row.uss
            if number(step) is None or number(t) is None or not isinstance(pid, int) or not (
                    number(uss) or 0) > 0:
                continue  # a worker read while it exits has no memory left: not a sample
            if self._sweep is not None and self._sweep[0] != t:
                series = self._close_sweep(series)
            if self._sweep is None:
                self._sweep = (t, step, {})
            self._sweep[2][pid] = number(uss) or 0.0
        self._cursor["workers"] = last

    def _close_sweep(self, series: Series | None) -> Series:
        if series is None:
            series = self.data.memory.setdefault("workers_uss", Series("workers_uss", "bytes"))
        assert self._sweep is not None
        _t, step, by_pid = self._sweep
        series.add(step, sum(by_pid.values()))
        self._sweep = None
        return series

    def finish(self) -> RunData:
        """Close the last open sweep (call once the trace is complete)."""
        if self._sweep is not None:
            self._close_sweep(self.data.memory.get("workers_uss"))
        return self.data

    def _heap(self, conn: sqlite3.Connection) -> None:
        heap = self.data.heap
        last = self._after("heap")
        names = ("py_blocks", "malloc_in_use", "malloc_free", "malloc_mmapped")
        for rowid, row in rows.read_new(conn, tables.HEAP_SAMPLES, last):
            last, step = rowid, row.step
            if number(step) is None:
                continue
            for name in names:
                value = getattr(row, name)
                if number(value) is not None:
                    unit = "count" if name == "py_blocks" else "bytes"
                    heap.setdefault(name, Series(name, unit)).add(step, float(value))
        self._cursor["heap"] = last

    def _cuda(self, conn: sqlite3.Connection) -> None:
        data = self.data
        last = self._after("cuda")
        for row in rows.read(conn, tables.CUDA_SAMPLES, last, device=0):
            step, total = row.step, row.total
            if not isinstance(step, int):
                continue
            used, cached = number(row.allocated) or 0.0, number(row.reserved) or 0.0
            data.memory.setdefault("cuda_allocated", Series("cuda_allocated", "bytes")).add(
                step, used)
            data.memory.setdefault("cuda_reserved_unused", Series(
                "cuda_reserved_unused", "bytes")).add(step, cached - used)
            data.cuda_total = int(total) if isinstance(total, int) else data.cuda_total
            data.cuda_extra = {"inactive_split": number(row.inactive_split) or 0.0,
                               "num_alloc_retries": number(row.num_alloc_retries) or 0.0,
                               "num_ooms": number(row.num_ooms) or 0.0}
            last = max(last, step)
        self._cursor["cuda"] = last

    def _holders(self, conn: sqlite3.Connection) -> None:
        data = self.data
        last_walk = self._after("walks")
        for walk in rows.read(conn, tables.HOLDER_WALKS, last_walk):
            step = walk.step
            if isinstance(step, int):
                if walk.kind == "full":
                    data.full_walks.append(step)
                last_walk = max(last_walk, step)
        self._cursor["walks"] = last_walk
        if len(data.full_walks) > MAX_POINTS:
            data.full_walks = data.full_walks[::2]
        last = self._after("holders")
        for row in rows.read(conn, tables.HOLDERS, last):
            step, holder, kind, type_name, nodes, detail = (
                row.step, row.holder, row.kind, row.type_name, row.graph_nodes, row.detail)
            if not isinstance(step, int) or not isinstance(holder, str) or not isinstance(
                    kind, str):
                continue
            last = max(last, step)
            series = data.holders.get(holder)
            if series is None:
                if len(data.holders) >= MAX_HOLDERS:
                    self._forget_oldest_holder()
                series = data.holders[holder] = HolderSeries(holder, kind, str(type_name or ""))
            series.add(step, *(number(v) or 0.0 for v in (row.length, row.bytes, row.tensors,
                                                          row.grad_fn_tensors, nodes)))
            if detail:
                try:
                    parsed = json.loads(detail)
                except (ValueError, RecursionError):
                    parsed = None
                if isinstance(parsed, dict):
                    if "graph_leaves" in parsed and "graph_leaves_first" not in series.detail:
                        series.detail["graph_leaves_first"] = parsed["graph_leaves"]
                        series.detail["graph_nodes_first"] = number(nodes) or 0.0
                    series.detail.update(parsed)
        self._cursor["holders"] = last

    def _forget_oldest_holder(self) -> None:
        holders = self.data.holders
        stale = min(holders, key=lambda h: holders[h].steps[-1] if holders[h].steps else 0)
        del holders[stale]

    def _census(self, conn: sqlite3.Connection) -> None:
        census = self.data.census
        names = ("tensors", "tensor_bytes", "grad_fn_tensors", "graph_nodes", "graph_bytes",
                 "gc_objects")
        last = self._after("census")
        for row in rows.read(conn, tables.CENSUS, last):
            step = row.step
            if not isinstance(step, int):
                continue
            for name in names:
                value = getattr(row, name)
                unit = "bytes" if "bytes" in name else "count"
                census.setdefault(name, Series(name, unit)).add(step, number(value) or 0.0)
            last = max(last, step)
        self._cursor["census"] = last
        last_split = self._after("breakdown")
        for split in rows.read(conn, tables.BREAKDOWN, last_split):
            step, category, nbytes = split.step, split.category, split.bytes
            if isinstance(step, int) and isinstance(category, str):
                self.data.breakdown.setdefault(category, Series(category, "bytes")).add(
                    step, number(nbytes) or 0.0)
                last_split = max(last_split, step)
        self._cursor["breakdown"] = last_split

    def _marks_events(self, conn: sqlite3.Connection) -> None:
        data = self.data
        last = self._after("marks")
        for rowid, mark in rows.read_new(conn, tables.MARKS, last):
            last, step, name, value = rowid, mark.step, mark.name, mark.value
            if isinstance(step, int):
                data.marks.append((step, str(name), None if value is None else str(value)))
        self._cursor["marks"] = last
        if len(data.marks) > MAX_MARKS:
            data.marks = data.marks[-MAX_MARKS:]
        last = self._after("events")
        for rowid, event in rows.read_new(conn, tables.EVENTS, last):
            last, step = rowid, event.step
            data.events.append((number(event.t) or 0.0, step if isinstance(step, int) else 0,
                                str(event.kind), str(event.source or ""),
                                str(event.message or "")))
        self._cursor["events"] = last
        if len(data.events) > MAX_EVENTS:
            data.events = data.events[-MAX_EVENTS:]


def load(conn: sqlite3.Connection) -> RunData:
    """The whole trace, streamed (bounded memory)."""
    builder = RunDataBuilder()
    builder.update(conn)
    return builder.finish()
