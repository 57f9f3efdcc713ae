"""Open a trace for a view (read-only, no side files: ``trace.reader``) and tell the
run's true status (a 'running' trace whose writer is gone was killed)."""

from __future__ import annotations

import os
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from torchleak.errors import TraceError
from torchleak.trace.reader import open_readonly, read_meta, resolve_trace_path, trace_uri
from torchleak.trace.schema import STATUS_RUNNING

STATUS_KILLED = "killed"
__all__ = ["RunState", "open_trace", "read_state", "run_status", "trace_uri", "STATUS_KILLED"]


def open_trace(run: str | Path) -> tuple[Path, sqlite3.Connection]:
    """Resolve ``run`` (folder or file) and open its trace read-only, checking it is ours."""
    path = resolve_trace_path(run)
    return path, open_readonly(path)


@dataclass
class RunState:
    """What a view needs to know about a run before drawing it."""

    path: Path
    meta: dict[str, Any]
    status: str  # running | finished | crashed | killed | unknown
    steps: int  # rows in the steps table (the recorder's meta['steps'] lags while running)

    @property
    def running(self) -> bool:
        return self.status == STATUS_RUNNING

    @property
    def name(self) -> str:
        return str(self.meta.get("name") or self.path.parent.name)


def read_state(path: Path, conn: sqlite3.Connection) -> RunState:
    try:
        meta = read_meta(conn)
        row = conn.execute("SELECT COUNT(*), MAX(step) FROM steps").fetchone()
    except sqlite3.DatabaseError as err:
        raise TraceError(f"cannot read {path} ({err}): the file may be corrupt") from err
    steps = int(row[1] or 0) if row[0] else 0
    return RunState(path=path, meta=meta, status=run_status(meta), steps=steps)


def run_status(meta: dict[str, Any]) -> str:
    """The recorded status, except that 'running' with a dead pid is 'killed'."""
    status = str(meta.get("status") or "unknown")
    if status != STATUS_RUNNING:
        return status
    return status if _writer_alive(meta) else STATUS_KILLED


def _writer_alive(meta: dict[str, Any]) -> bool:
    pid = meta.get("pid")
    if not isinstance(pid, int) or pid <= 0:
        return True  # cannot tell: trust the trace
    host = meta.get("hostname")
    if host and host != _hostname():
        return True  # a pid on another machine says nothing here
    try:
        import psutil

        proc = psutil.Process(pid)
        started = meta.get("start_time")
        # A recycled pid belongs to a process younger than the run.
        if isinstance(started, (int, float)) and proc.create_time() > started + 2:
            return False
        return proc.status() != psutil.STATUS_ZOMBIE
    except ImportError:
        return _pid_exists(pid)
    except Exception:  # noqa: BLE001 - psutil.NoSuchProcess / AccessDenied and friends
        return _pid_exists(pid)


def _pid_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _hostname() -> str:
    import socket

    return socket.gethostname()
