"""The trace is readable while the run writes it, survives ``kill -9`` with everything up
to about the last second, and a SIGTERM marks it 'killed'."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from recordkit import TORCHLEAK, RunPool, child_env, prefetch, weight, write_script

pytestmark = pytest.mark.slow

LONG = """
    import time

    import torch

    torch.set_num_threads(1)
    model = torch.nn.Linear(32, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    for step in range(1, 3001):
        loss = model(torch.randn(8, 32)).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        print("step", step, flush=True)
        time.sleep(0.005)
"""
STEPS_BEFORE_KILL = 150  # ~1 s of steps, several writer flushes


@dataclass
class LiveRun:
    """A ``torchleak run`` in its own process group, its stdout read line by line."""

    proc: subprocess.Popen[str]
    trace: Path
    last_printed: int = 0
    lines: list[str] = field(default_factory=list)

    @classmethod
    def start(cls, folder: Path) -> LiveRun:
        write_script(folder, "long.py", LONG)
        proc = subprocess.Popen([*TORCHLEAK, "run", "--quiet", "--out", "out", "long.py"],
                                cwd=folder, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, env=child_env(), start_new_session=True)
        run = cls(proc, folder / "out" / "trace.sqlite")
        threading.Thread(target=run._read, daemon=True).start()
        return run

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line)
            if line.startswith("step "):
                self.last_printed = int(line.split()[1])

    def wait_for_step(self, step: int, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while self.last_printed < step:
            assert self.proc.poll() is None, self.proc.stderr.read()  # type: ignore[union-attr]
            assert time.monotonic() < deadline, "the training never got going"
            time.sleep(0.02)

    def read_live(self) -> list[tuple[int, float]]:
        conn = sqlite3.connect(f"file:{self.trace}?mode=ro", uri=True, timeout=5)
        try:
            return conn.execute("SELECT step, MAX(allocated) FROM torch_trace GROUP BY step "
                                "ORDER BY step").fetchall()
        finally:
            conn.close()

    def kill(self, signum: int, group: bool) -> int:
        if group:
            os.killpg(self.proc.pid, signum)
        else:
            self.proc.send_signal(signum)
        return self.proc.wait(timeout=30)


@dataclass
class KillResult:
    live_rows: list[tuple[int, float]]
    last_printed: int
    returncode: int
    trace: Path


@prefetch
@weight(5)
def kill_nine(folder: Path) -> KillResult:
    run = LiveRun.start(folder)
    try:
        run.wait_for_step(STEPS_BEFORE_KILL)
        live_rows = run.read_live()
        run.wait_for_step(run.last_printed + 20)  # more steps after our read
    finally:
        code = run.kill(signal.SIGKILL, group=True)
    time.sleep(0.1)  # let the reader thread take the last lines
    return KillResult(live_rows, run.last_printed, code, run.trace)


@prefetch
@weight(5)
def sigterm(folder: Path) -> KillResult:
    run = LiveRun.start(folder)
    try:
        run.wait_for_step(STEPS_BEFORE_KILL)
    finally:
        code = run.kill(signal.SIGTERM, group=False)
    time.sleep(0.1)
    return KillResult([], run.last_printed, code, run.trace)


def _integrity(trace: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(f"file:{trace}?mode=ro", uri=True)
    assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    return conn


def test_trace_is_readable_while_training_runs(runs: RunPool) -> None:
    result = runs.get(kill_nine)
    assert len(result.live_rows) >= 10
    steps = [step for step, _ in result.live_rows]
    assert steps == list(range(1, len(steps) + 1))
    assert all(allocated > 0 for _, allocated in result.live_rows)  # CPU: main USS in MiB


def test_kill_nine_keeps_the_steps_up_to_the_last_second(runs: RunPool) -> None:
    result = runs.get(kill_nine)
    assert result.returncode == -signal.SIGKILL
    conn = _integrity(result.trace)
    count, last, first_t, last_t = conn.execute(
        "SELECT COUNT(*), MAX(step), MIN(t), MAX(t) FROM steps").fetchone()
    assert count == last  # no holes
    assert last <= result.last_printed + 1  # the boundary is recorded before the print
    steps_per_second = (last - 1) / (last_t - first_t)
    assert result.last_printed - last <= max(steps_per_second * 1.0, 10), (
        f"trace ends at step {last}, script printed {result.last_printed}, "
        f"{steps_per_second:.0f} steps/s")
    status = conn.execute("SELECT value FROM meta WHERE key = 'status'").fetchone()
    assert status == ('"running"',)  # nobody could say otherwise: the pid is gone


def test_sigterm_leaves_a_trace_that_reads_as_killed(runs: RunPool) -> None:
    from torchleak.trace.catalog import run_status
    from torchleak.trace.reader import open_trace, read_meta

    result = runs.get(sigterm)
    assert result.returncode == -signal.SIGTERM  # it dies of SIGTERM, as without torchleak
    conn = _integrity(result.trace)
    # torchleak installs no signal handler of its own: the trace simply stops, and every
    # reader tells a dead writer from a live one.
    status = conn.execute("SELECT value FROM meta WHERE key = 'status'").fetchone()
    assert status == ('"running"',)
    with open_trace(result.trace) as trace:
        assert run_status(read_meta(trace.conn), result.trace) == "killed"
    # Without a handler of ours the process dies at once, as it would without torchleak:
    # the trace loses at most the last flush interval, like after kill -9.
    count, last, first_t, last_t = conn.execute(
        "SELECT COUNT(*), MAX(step), MIN(t), MAX(t) FROM steps").fetchone()
    steps_per_second = (last - 1) / (last_t - first_t)
    assert count == last and result.last_printed - last <= max(steps_per_second * 1.0, 10)
    assert last <= result.last_printed + 1
