"""Helpers for the attach tests: a live ``torchleak run`` of a leaky script, an in-process
Monitor with a loop on its own thread, the real CLI, and a client run as another user."""

from __future__ import annotations

import json
import os
import select
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

TORCHLEAK = [sys.executable, "-m", "torchleak"]
NOBODY = 65534

# A leak of 256 KiB a step (above glibc's mmap threshold, so freeing it shows in USS at
# once), ~40 steps a second. ``leaking`` and ``pause`` are globals an attached eval may set.
LEAKY = """
    import os
    import time

    import torch

    torch.set_num_threads(1)
    model = torch.nn.Linear(64, 64)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    history = []
    leaking = True
    pause = 0.0


    def train():
        step = 0
        while not os.path.exists("stop") and step < 20000:
            step += 1
            loss = model(torch.randn(32, 64)).pow(2).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            if leaking:
                history.append(torch.randn(64, 1024))
            time.sleep(0.02 + pause)
            while os.path.exists("hold"):  # a test holds this step open: no boundary
                open("held", "w").close()
                time.sleep(0.01)


    train()
    print("finished", len(history))
"""


def child_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    env.pop("TORCHLEAK_CONTROL", None)
    env.update(extra)
    return env


def attach(*args: str, cwd: Path, env: dict[str, str] | None = None,
           timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*TORCHLEAK, "attach", *args], cwd=cwd, text=True,
                          capture_output=True, timeout=timeout, env=env or child_env())


@dataclass
class LiveRun:
    """``torchleak run`` of a script, in a folder any user can traverse."""

    folder: Path
    proc: subprocess.Popen[str]
    out: Path = field(init=False)

    def __post_init__(self) -> None:
        self.out = self.folder / "run"

    @classmethod
    def start(cls, folder: Path, source: str, *options: str,
              env: dict[str, str] | None = None) -> LiveRun:
        (folder / "leaky.py").write_text(textwrap.dedent(source).lstrip())
        proc = subprocess.Popen([*TORCHLEAK, "run", "--quiet", "--out", "run", *options,
                                 "leaky.py"], cwd=folder, text=True, env=env or child_env(),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        return cls(folder, proc)

    @property
    def socket(self) -> Path:
        return self.out / "control.sock"

    def steps(self) -> int:
        try:
            conn = sqlite3.connect(f"file:{self.out / 'trace.sqlite'}?mode=ro", uri=True,
                                   timeout=5)
        except sqlite3.Error:
            return 0
        try:
            return int(conn.execute("SELECT COALESCE(MAX(step), 0) FROM steps").fetchone()[0])
        except sqlite3.Error:
            return 0
        finally:
            conn.close()

    def wait_for_step(self, step: int, timeout: float = 120) -> int:
        deadline = time.monotonic() + timeout
        while (now := self.steps()) < step:
            if self.proc.poll() is not None:
                raise AssertionError(f"the run ended: {self.proc.communicate()}")
            assert time.monotonic() < deadline, "the training never got going"
            time.sleep(0.05)
        return now

    def finish(self, timeout: float = 60) -> tuple[int, str, str]:
        (self.folder / "stop").touch()
        out, err = self.proc.communicate(timeout=timeout)
        return self.proc.returncode, out, err

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.communicate(timeout=30)


class LoopThread:
    """A training loop on a thread of its own: one ``torchleak.watch()`` step every
    ``interval`` seconds, held while ``gate`` is cleared (a step stuck in C code)."""

    def __init__(self, interval: float = 0.01) -> None:
        self.interval = interval
        self.gate = threading.Event()
        self.gate.set()
        self.steps = 0
        self.parked = threading.Event()  # set while the loop waits at the gate
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="training", daemon=True)

    def _run(self) -> None:
        import torchleak

        watcher = torchleak.watch()
        while not self._stop.is_set():
            if not self.gate.is_set():
                self.parked.set()
                self.gate.wait()
                self.parked.clear()
            time.sleep(self.interval)
            watcher.step()
            self.steps += 1

    def start(self) -> LoopThread:
        self._thread.start()
        return self

    def hold(self) -> None:
        """Keep the loop from its next step boundary, and wait until it is held."""
        self.gate.clear()
        assert self.parked.wait(10), "the loop thread never came to the gate"

    def stop(self) -> None:
        self._stop.set()
        self.gate.set()
        self._thread.join(timeout=10)

    def wait_steps(self, count: int, timeout: float = 10) -> None:
        target = self.steps + count
        deadline = time.monotonic() + timeout
        while self.steps < target:
            assert time.monotonic() < deadline, "the loop thread stopped stepping"
            time.sleep(0.005)


def as_other_user(uid: int, action: Callable[[], Any]) -> str:
    """``action()``'s result (or its exception) as text, run in a child process that has
    become ``uid``: the real client code, as another user would run it."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        outcome = "nothing"
        try:
            os.close(read_end)
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
            outcome = f"ok: {json.dumps(action(), default=str)}"
        except BaseException as err:  # noqa: BLE001 - reported to the parent
            outcome = f"{type(err).__name__}: {err}"
        finally:
            os.write(write_end, outcome.encode())
            os._exit(0)
    os.close(write_end)
    chunks = []
    try:
        deadline = time.monotonic() + 30
        while select.select([read_end], [], [], max(0.0, deadline - time.monotonic()))[0]:
            chunk = os.read(read_end, 65536)
            if not chunk:
                break
            chunks.append(chunk)
        else:
            os.kill(pid, signal.SIGKILL)
            return "the child hung"
    finally:
        os.close(read_end)
        os.waitpid(pid, 0)
    return b"".join(chunks).decode()


def trace_rows(trace: Path, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    """Rows through torchleak's own reader (a live trace is read as the writer writes)."""
    from torchleak.trace.reader import open_trace

    with open_trace(trace) as opened:
        return opened.conn.execute(sql, params).fetchall()
