"""Where runs live: the runs folder, a run's traces (one per rank), and a run's true status.

A run folder holds ``trace.sqlite``, or, for a multi-process launch (torchrun), one
``rank<N>/trace.sqlite`` per rank. Users name a run by its folder, its trace file, its
folder name inside the runs folder (or a prefix of it), or nothing (the newest run).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from torchleak.errors import InputNotFound, TorchleakError
from torchleak.trace.reader import open_trace, pid_alive, read_meta, writer_alive
from torchleak.trace.schema import TRACE_FILENAME
from torchleak.vocab import RunStatus

RUNS_DIR_ENV = "TORCHLEAK_RUNS_DIR"
DEFAULT_RUNS_DIR = "torchleak-runs"
_RANK_DIR = re.compile(r"^rank(\d+)$")


def runs_dir(override: str | Path | None = None) -> Path:
    if override:
        return Path(override)
    return Path(os.environ.get(RUNS_DIR_ENV) or DEFAULT_RUNS_DIR)


@dataclass(frozen=True)
class RunFolder:
    """One run: its folder and its traces, rank 0 first."""

    path: Path
    traces: tuple[Path, ...]

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def ranks(self) -> int:
        return len(self.traces)

    def rank_of(self, trace: Path) -> int | None:
        match = _RANK_DIR.match(trace.parent.name)
        return int(match.group(1)) if match and trace.parent.parent == self.path else None


def run_folder(path: Path) -> RunFolder | None:
    """The run in ``path`` (a run folder, a rank folder's parent, or a trace file)."""
    if path.is_file():
        parent = path.parent
        if _RANK_DIR.match(parent.name):
            found = run_folder(parent.parent)
            if found is not None:
                return found
        return RunFolder(parent, (path,))
    if (path / TRACE_FILENAME).is_file():
        return RunFolder(path, (path / TRACE_FILENAME,))
    ranks = []
    try:
        for child in path.iterdir():
            match = _RANK_DIR.match(child.name)
            if match and (child / TRACE_FILENAME).is_file():
                ranks.append((int(match.group(1)), child / TRACE_FILENAME))
    except OSError:
        return None
    if not ranks:
        return None
    return RunFolder(path, tuple(p for _, p in sorted(ranks)))


def find_runs(folder: Path) -> list[RunFolder]:
    """Every run folder directly inside ``folder``."""
    try:
        children = sorted(p for p in folder.iterdir() if p.is_dir())
    except OSError:
        return []
    return [run for run in map(run_folder, children) if run is not None]


def run_status(meta: dict[str, Any], trace: Path) -> RunStatus:
    """The recorded status, except that 'running' with no live writer is 'killed'."""
    try:
        status = RunStatus(meta.get("status"))
    except ValueError:
        status = RunStatus.RUNNING  # missing or unknown: judged by whether it is alive
    if status is RunStatus.RUNNING and not _alive(meta, trace):
        return RunStatus.KILLED
    return status


def _alive(meta: dict[str, Any], trace: Path) -> bool:
    alive = writer_alive(trace)
    if alive is not None:
        return alive
    pid = meta.get("pid")
    host = meta.get("hostname")
    if not isinstance(pid, int) or pid <= 0 or (host and host != _hostname()):
        return True  # cannot tell: trust the trace
    return pid_alive(pid)


def _hostname() -> str:
    import socket

    return socket.gethostname()


def start_time(run: RunFolder) -> float:
    """When the run started (its first trace's meta), else its folder's mtime."""
    try:
        with open_trace(run.traces[0]) as trace:
            value = read_meta(trace.conn).get("start_time")
        if isinstance(value, (int, float)):
            return float(value)
    except (TorchleakError, OSError):
        pass
    try:
        return run.path.stat().st_mtime
    except OSError:
        return 0.0


def resolve_run(run: str | Path | None, folder: str | Path | None = None) -> RunFolder:
    """A run given as a path, as a folder name in the runs folder, or (None) the newest."""
    base = runs_dir(folder)
    if run is None:
        runs = find_runs(base)
        if not runs:
            raise InputNotFound(f"no runs in {base.resolve()}: record one with `torchleak run "
                                f"train.py`, or point ${RUNS_DIR_ENV} / --runs-dir at your "
                                "runs folder")
        return max(runs, key=start_time)
    path = Path(run)
    if path.exists():
        found = run_folder(path)
        if found is not None:
            return found
        raise InputNotFound(f"no trace at {path}: pass a run folder made by `torchleak run` "
                            "(see `torchleak ls`) or its trace.sqlite")
    named = [r for r in find_runs(base) if r.name == str(run) or r.name.startswith(f"{run}-")]
    if named:
        return max(named, key=lambda r: r.name)
    raise InputNotFound(f"no trace at {path}: no such folder, and no run of that name in "
                        f"{base} (see `torchleak ls`)")
