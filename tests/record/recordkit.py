"""Helpers for the end-to-end recorder tests: run the real CLI, read the trace it wrote.

Every run goes through ``python -m torchleak run`` in a subprocess, so what is tested is
exactly what a user gets (argument parsing, exit codes, stderr, signal handling).
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import textwrap
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from torchleak.trace.judgements import Judgement, judgement

TORCHLEAK = [sys.executable, "-m", "torchleak"]
KIB = 1024


def child_env(**extra: str) -> dict[str, str]:
    """The environment of every child: one compute thread (2 cores, runs may overlap),
    and no run folders written into the repository by accident."""
    env = dict(os.environ)
    env.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    env.pop("PYTHONUNBUFFERED", None)  # stdout buffering must be the script's own
    env.update(extra)
    return env


def write_script(folder: Path, name: str, source: str) -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(source).lstrip())
    return path


def run_python(args: list[str], cwd: Path, stdin: str | None = None, timeout: float = 120,
               env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *args], cwd=cwd, input=stdin, text=True,
                          capture_output=True, timeout=timeout, env=child_env(
                              TORCHLEAK_RUNS_DIR=str(cwd / "torchleak-runs"), **(env or {})))


def run_torchleak(args: list[str], cwd: Path, stdin: str | None = None, timeout: float = 180,
                  env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*TORCHLEAK, *args], cwd=cwd, input=stdin, text=True,
                          capture_output=True, timeout=timeout, env=child_env(
                              TORCHLEAK_RUNS_DIR=str(cwd / "torchleak-runs"), **(env or {})))


def without_our_lines(stderr: str) -> str:
    """stderr minus torchleak's own lines (they all start with ``torchleak:`` or, for the
    summary's detail lines, follow one indented)."""
    kept: list[str] = []
    ours = False
    for line in stderr.splitlines(keepends=True):
        if line.startswith("torchleak:"):
            ours = True
            continue
        if ours and line.startswith("  ") and not line.startswith("  File "):
            continue
        ours = False
        kept.append(line)
    return "".join(kept)


@dataclass
class Recorded:
    """One finished ``torchleak run``: its process result and its trace."""

    proc: subprocess.CompletedProcess[str]
    out: Path

    @property
    def trace(self) -> Path:
        return self.out / "trace.sqlite"

    def connect(self) -> sqlite3.Connection:
        return sqlite3.connect(f"file:{self.trace}?mode=ro", uri=True)

    def rows(self, sql: str, *params: Any) -> list[tuple[Any, ...]]:
        conn = self.connect()
        try:
            return conn.execute(sql, params).fetchall()
        finally:
            conn.close()

    def scalar(self, sql: str, *params: Any) -> Any:
        return self.rows(sql, *params)[0][0]

    def meta(self, key: str) -> Any:
        found = self.rows("SELECT value FROM meta WHERE key = ?", key)
        return json.loads(found[0][0]) if found else None

    def judgement(self, phase: str) -> Judgement | None:
        """The run's stored ``phase`` judgement ('live' or 'final'), its report included."""
        conn = self.connect()
        try:
            return judgement(conn, phase)
        finally:
            conn.close()


def record(folder: Path, script: Path, *args: str, options: tuple[str, ...] = (),
           stdin: str | None = None) -> Recorded:
    out = folder / f"run-{script.stem}"
    proc = run_torchleak(["run", "--out", str(out), *options, str(script), *args], cwd=folder,
                         stdin=stdin)
    return Recorded(proc, out)


def plain_then_recorded(folder: Path, name: str, source: str, options: tuple[str, ...] = ()
                        ) -> tuple[subprocess.CompletedProcess[str], Recorded]:
    """The script ``source`` (written as ``name``) run under python, then under
    ``torchleak run`` with ``options``: the pair a never-harmful test compares."""
    script = write_script(folder, name, source)
    return run_python([script.name], cwd=folder), record(folder, script, options=options)


def theil_sen(xs: list[float], ys: list[float]) -> float:
    """Median of pairwise slopes: robust to the odd allocator hiccup."""
    import numpy as np

    x, y = np.asarray(xs, dtype=float), np.asarray(ys, dtype=float)
    i, j = np.triu_indices(len(x), k=1)
    keep = x[j] != x[i]
    return float(np.median((y[j] - y[i])[keep] / (x[j] - x[i])[keep]))


def least_squares(xs: list[float], ys: list[float]) -> float:
    import numpy as np

    return float(np.polyfit(np.asarray(xs, float), np.asarray(ys, float), 1)[0])


# Prefetching -------------------------------------------------------------------------------
# A torchleak run is mostly torch's import (seconds of CPU) and sleeping training loops, so
# every recorded run the collected test modules need is started when the session starts,
# a few at a time, and each module's fixture only waits for its own result.

Job = Callable[[Path], Any]
_JOBS: dict[str, Job] = {}


def prefetch(job: Job) -> Job:
    """Register ``job(folder) -> result`` to start as soon as the test session starts."""
    _JOBS[_key(job)] = job
    return job


def _key(job: Job) -> str:
    return f"{job.__module__}.{job.__qualname__}"


class RunPool:
    def __init__(self, base: Path, workers: int) -> None:
        self._base = base
        self._executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="run")
        self._futures: dict[str, Future[Any]] = {}

    def start_all(self) -> None:
        for key in sorted(_JOBS, key=lambda k: -getattr(_JOBS[k], "weight", 1)):
            self._submit(key)

    def _submit(self, key: str) -> Future[Any]:
        if key not in self._futures:
            folder = self._base / key.rsplit(".", 2)[-2].removeprefix("test_record_") / (
                key.rsplit(".", 1)[-1])
            folder.mkdir(parents=True)
            self._futures[key] = self._executor.submit(_JOBS[key], folder)
        return self._futures[key]

    def get(self, job: Job) -> Any:
        _JOBS.setdefault(_key(job), job)
        return self._submit(_key(job)).result(timeout=300)

    def shutdown(self) -> None:
        for future in self._futures.values():
            future.cancel()
        self._executor.shutdown(wait=True)


def weight(value: float) -> Callable[[Job], Job]:
    """Longer jobs start first."""
    def set_weight(job: Job) -> Job:
        job.weight = value  # type: ignore[attr-defined]
        return job

    return set_weight


def memory_cgroup(name: str, limit: int) -> Path | None:
    """A cgroup v1 memory group of ``limit`` bytes below this process's own, or None
    where the controller cannot be written (the caller skips with a reason)."""
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        parts = line.split(":", 2)
        if len(parts) == 3 and parts[1] == "memory":
            folder = Path("/sys/fs/cgroup/memory") / parts[2].lstrip("/") / name
            try:
                folder.mkdir(exist_ok=True)
                (folder / "memory.limit_in_bytes").write_text(str(limit))
            except OSError:
                return None
            return folder
    return None
