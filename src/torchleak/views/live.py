"""Follow a trace while another process writes it (WAL): incremental, read-only polling.

One read-only connection stays open; in autocommit mode every query starts a fresh read
transaction, so each poll sees the writer's latest commit. Only rows newer than the
last poll are fetched, so a poll costs the same at step 100 and at step 1,000,000.
"""

from __future__ import annotations

import sqlite3
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from torchleak.errors import TraceError
from torchleak.report import Finding
from torchleak.trace.reader import read_meta
from torchleak.views.findings import findings_from_table, report_from_dict
from torchleak.views.source import open_trace, run_status

HISTORY = 600  # points kept per signal for sparklines and the recent trend
BYTES_SIGNALS = ("main_uss", "main_rss", "workers_uss", "cuda_allocated", "cuda_reserved",
                 "tensor_bytes", "graph_bytes")


@dataclass
class History:
    steps: deque[int] = field(default_factory=lambda: deque(maxlen=HISTORY))
    values: deque[float] = field(default_factory=lambda: deque(maxlen=HISTORY))
    peak: float | None = None

    def add(self, step: int, value: float | None) -> None:
        if value is None:
            return
        self.steps.append(step)
        self.values.append(float(value))
        self.peak = value if self.peak is None else max(self.peak, value)


@dataclass
class LiveState:
    path: Path
    meta: dict[str, Any] = field(default_factory=dict)
    status: str = "unknown"
    step: int = 0
    step_times: deque[tuple[int, float]] = field(default_factory=lambda: deque(maxlen=50))
    signals: dict[str, History] = field(default_factory=dict)
    workers: int = 0
    findings: list[Finding] = field(default_factory=list)
    events: list[str] = field(default_factory=list)
    polled_at: float = 0.0

    def history(self, name: str) -> History:
        return self.signals.setdefault(name, History())

    @property
    def steps_per_second(self) -> float | None:
        if len(self.step_times) < 2:
            return None
        (s0, t0), (s1, t1) = self.step_times[0], self.step_times[-1]
        return (s1 - s0) / (t1 - t0) if t1 > t0 else None

    @property
    def final_verdict(self) -> str | None:
        report = report_from_dict(self.meta.get("report"))
        return report.verdict if report else None


class LiveTrace:
    """Polls one trace; ``poll()`` returns the updated state."""

    def __init__(self, run: str | Path) -> None:
        self.path, self._conn = open_trace(run)
        self.state = LiveState(self.path)
        self._cursor = {"cuda": 0, "census": 0, "workers": 0}

    def close(self) -> None:
        self._conn.close()

    def poll(self) -> LiveState:
        state = self.state
        try:
            state.meta = read_meta(self._conn)
            self._poll_steps(state)
            self._poll_workers(state)
            self._poll_cuda(state)
            self._poll_census(state)
            state.findings = findings_from_table(self._conn)
            state.events = self._recent_events()
        except sqlite3.OperationalError as err:
            if "locked" not in str(err) and "busy" not in str(err):
                raise TraceError(f"cannot read {self.path} while following it: {err}") from err
        except sqlite3.DatabaseError as err:
            raise TraceError(f"cannot read {self.path} while following it: {err}") from err
        state.status = run_status(state.meta)
        state.polled_at = time.time()
        return state

    def _poll_steps(self, state: LiveState) -> None:
        rows = self._conn.execute(
            "SELECT step, t, uss, rss FROM steps WHERE step > ? ORDER BY step", (state.step,))
        for step, t, uss, rss in rows:
            state.history("main_uss").add(step, uss)
            state.history("main_rss").add(step, rss)
            state.step_times.append((step, t))
            state.step = step

    def _poll_workers(self, state: LiveState) -> None:
        # Bound by the rowid read first, so a commit landing between the two reads is
        # picked up by the next poll instead of being skipped.
        last = self._conn.execute("SELECT MAX(rowid) FROM process_samples").fetchone()[0] or 0
        rows = self._conn.execute(
            "SELECT step, COUNT(DISTINCT pid), SUM(COALESCE(uss, rss)) FROM process_samples "
            "WHERE role = 'worker' AND rowid > ? AND rowid <= ? GROUP BY step ORDER BY step",
            (self._cursor["workers"], last)).fetchall()
        for step, count, total in rows:
            state.history("workers_uss").add(step, total)
            state.workers = count
        self._cursor["workers"] = last

    def _poll_cuda(self, state: LiveState) -> None:
        rows = self._conn.execute(
            "SELECT step, allocated, reserved FROM cuda_samples WHERE device = 0 AND step > ? "
            "ORDER BY step", (self._cursor["cuda"],))
        for step, allocated, reserved in rows:
            state.history("cuda_allocated").add(step, allocated)
            state.history("cuda_reserved").add(step, reserved)
            self._cursor["cuda"] = step

    def _poll_census(self, state: LiveState) -> None:
        rows = self._conn.execute(
            "SELECT step, tensors, tensor_bytes, graph_bytes FROM census WHERE step > ? ORDER BY step",
            (self._cursor["census"],))
        for step, tensors, tensor_bytes, graph_bytes in rows:
            state.history("tensors").add(step, tensors)
            state.history("tensor_bytes").add(step, tensor_bytes)
            state.history("graph_bytes").add(step, graph_bytes)
            self._cursor["census"] = step

    def _recent_events(self) -> list[str]:
        rows = self._conn.execute(
            "SELECT step, kind, source, message FROM events ORDER BY t DESC LIMIT 3").fetchall()
        return [f"step {r[0]}: {r[1]} {r[2] or ''}: {r[3] or ''}".strip() for r in reversed(rows)]
