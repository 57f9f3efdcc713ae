"""Memory signals over steps, read from a trace, ready to plot or summarise.

Each ``Line`` is one named signal (``main_uss``, ``cuda_allocated`` ...); the names are the
ones the analysis uses in ``Signal.name`` / ``Finding.signal`` so a finding lands on the
chart of the signal it is about. A ``Chart`` groups lines that share a unit and a story.
"""

from __future__ import annotations

import sqlite3
from collections import defaultdict
from dataclasses import dataclass, field

from torchleak.errors import TraceError


@dataclass
class Line:
    name: str  # signal name, as in Report.signals / Finding.signal
    label: str  # what the legend says
    steps: list[int]
    values: list[float]
    primary: bool = True  # secondary lines (e.g. reserved beside allocated) are drawn lighter
    plot: bool = True  # False: a table row only (RSS would squash USS's scale)

    @property
    def last(self) -> float | None:
        return self.values[-1] if self.values else None

    @property
    def peak(self) -> float | None:
        return max(self.values) if self.values else None


@dataclass
class Chart:
    key: str
    title: str
    unit: str  # 'bytes' | 'count'
    lines: list[Line] = field(default_factory=list)
    note: str = ""

    def line(self, name: str) -> Line | None:
        return next((ln for ln in self.lines if ln.name == name), None)


@dataclass
class Mark:
    step: int
    name: str  # 'epoch' | 'validation_start' | 'validation_end' | user
    value: str | None = None


def load_charts(conn: sqlite3.Connection) -> list[Chart]:
    """Every memory signal the trace holds, one chart per signal family, empty ones left out."""
    try:
        charts = [_main_chart(conn), *_worker_charts(conn), *_cuda_charts(conn),
                  *_census_charts(conn)]
    except sqlite3.DatabaseError as err:
        raise TraceError(f"cannot read the trace's samples ({err}): the file may be corrupt") from err
    return [c for c in charts if any(ln.values for ln in c.lines)]


def load_marks(conn: sqlite3.Connection) -> list[Mark]:
    try:
        rows = conn.execute("SELECT step, name, value FROM marks ORDER BY step, t").fetchall()
    except sqlite3.DatabaseError:
        return []
    return [Mark(int(r[0]), str(r[1]), r[2]) for r in rows]


def _column(conn: sqlite3.Connection, sql: str) -> tuple[list[int], list[float]]:
    steps: list[int] = []
    values: list[float] = []
    for step, value in conn.execute(sql):
        if value is not None:
            steps.append(int(step))
            values.append(float(value))
    return steps, values


def _main_chart(conn: sqlite3.Connection) -> Chart:
    chart = Chart("main", "Main process memory (USS)", "bytes",
                  note="USS: memory only this process holds (RSS, in the table, also counts "
                       "pages shared with other processes).")
    steps, values = _column(conn, "SELECT step, uss FROM steps ORDER BY step")
    chart.lines.append(Line("main_uss", "USS", steps, values))
    steps, values = _column(conn, "SELECT step, rss FROM steps ORDER BY step")
    chart.lines.append(Line("main_rss", "RSS", steps, values, primary=True, plot=False))
    return chart


def _worker_charts(conn: sqlite3.Connection) -> list[Chart]:
    per_pid: dict[int, tuple[list[int], list[float]]] = defaultdict(lambda: ([], []))
    latest: dict[tuple[int, int], float] = {}  # (step, pid) -> last sample in that step
    rows = conn.execute(
        "SELECT step, pid, COALESCE(uss, rss) FROM process_samples "
        "WHERE role = 'worker' ORDER BY step, t")
    for step, pid, value in rows:
        if value is None:
            continue
        per_pid[int(pid)][0].append(int(step))
        per_pid[int(pid)][1].append(float(value))
        latest[(int(step), int(pid))] = float(value)
    totals: dict[int, float] = defaultdict(float)
    for (step, _pid), value in latest.items():
        totals[step] += value
    if not per_pid:
        return []
    chart = Chart("workers", "DataLoader workers", "bytes",
                  note=f"{len(per_pid)} worker process(es); USS per worker and their sum.")
    chart.lines.append(Line("workers_uss", "all workers", sorted(totals),
                            [totals[s] for s in sorted(totals)]))
    for pid in sorted(per_pid):
        steps, values = per_pid[pid]
        chart.lines.append(Line(f"worker_{pid}_uss", f"pid {pid}", steps, values, False))
    return [chart]


def _cuda_charts(conn: sqlite3.Connection) -> list[Chart]:
    devices = [int(r[0]) for r in conn.execute("SELECT DISTINCT device FROM cuda_samples ORDER BY device")]
    charts = []
    for device in devices:
        prefix = "cuda" if device == 0 else f"cuda{device}"
        chart = Chart(f"cuda{device}", f"CUDA memory, cuda:{device}", "bytes",
                      note="allocated: live tensors; reserved: held by the caching allocator; "
                           "reserved unused: cached but free (fragmentation).")
        for col, expr, primary in (("allocated", "allocated", True), ("reserved", "reserved", False),
                                   ("reserved_unused", "reserved - allocated", False)):
            steps, values = _column(
                conn, f"SELECT step, {expr} FROM cuda_samples WHERE device = {device} ORDER BY step")
            chart.lines.append(Line(f"{prefix}_{col}", col.replace("_", " "), steps, values, primary))
        charts.append(chart)
    return charts


def _census_charts(conn: sqlite3.Connection) -> list[Chart]:
    def census(col: str) -> tuple[list[int], list[float]]:
        return _column(conn, f"SELECT step, {col} FROM census ORDER BY step")

    tensors = Chart("tensors", "Live tensors", "bytes",
                    note="Storage bytes of tensors reachable through the garbage collector.")
    tensors.lines.append(Line("tensor_bytes", "tensor bytes", *census("tensor_bytes")))
    count = Chart("tensor_count", "Live tensor count", "count")
    count.lines.append(Line("tensors", "tensors", *census("tensors")))
    count.lines.append(Line("grad_fn_tensors", "with grad_fn", *census("grad_fn_tensors"), False))
    count.lines.append(Line("graph_nodes", "autograd nodes", *census("graph_nodes"), False))
    graph = Chart("graph", "Autograd graph retained", "bytes",
                  note="Saved tensors held by autograd graphs reachable from live tensors.")
    graph.lines.append(Line("graph_bytes", "graph bytes", *census("graph_bytes")))
    return [tensors, count, graph]


def downsample(steps: list[int], values: list[float], limit: int = 2000) -> tuple[list[int], list[float]]:
    """At most ~``limit`` points, keeping each bucket's min and max so spikes survive."""
    if len(values) <= limit:
        return steps, values
    buckets = max(1, limit // 2)
    out_s: list[int] = []
    out_v: list[float] = []
    n = len(values)
    for b in range(buckets):
        lo, hi = b * n // buckets, max(b * n // buckets + 1, (b + 1) * n // buckets)
        chunk = range(lo, hi)
        i_min = min(chunk, key=values.__getitem__)
        i_max = max(chunk, key=values.__getitem__)
        for i in sorted({i_min, i_max}):
            out_s.append(steps[i])
            out_v.append(values[i])
    return out_s, out_v
