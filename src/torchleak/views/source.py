"""Open a trace for a view: read-only, with no side files, and with the run's true status.

``trace.reader.open_readonly`` opens with ``mode=ro``; on a finished WAL-mode trace that
still leaves empty ``-wal``/``-shm`` files beside it. A view must leave the run folder as
it found it, so a trace with no ``-wal`` file (nobody is writing it) is opened
``immutable``, which reads the main file only. A trace being written keeps ``mode=ro``,
which reads the writer's WAL through its shared memory.
"""

from __future__ import annotations

import json
import os
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

from torchleak.errors import BadInput, TraceError
from torchleak.trace.reader import read_meta, resolve_trace_path
from torchleak.trace.schema import SCHEMA_VERSION, STATUS_RUNNING

STATUS_KILLED = "killed"
_SQLITE_MAGIC = b"SQLite format 3\x00"


def trace_uri(path: Path) -> str:
    """The URI a view opens: immutable when no writer's WAL is beside the file."""
    resolved = path.resolve()
    live = Path(f"{resolved}-wal").exists()
    flags = "mode=ro" if live else "mode=ro&immutable=1"
    return f"file:{quote(resolved.as_posix())}?{flags}"


def open_trace(run: str | Path) -> tuple[Path, sqlite3.Connection]:
    """Resolve ``run`` (folder or file) and open its trace read-only, checking it is ours."""
    path = resolve_trace_path(run)
    _check_magic(path)
    try:
        conn = sqlite3.connect(trace_uri(path), uri=True, timeout=5.0)
        conn.row_factory = sqlite3.Row
        conn.execute("PRAGMA query_only=ON")
        names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
    except sqlite3.DatabaseError as err:
        raise TraceError(f"{path} is not a readable torchleak trace ({err}): was it truncated?") from err
    if "meta" not in names or "steps" not in names:
        conn.close()
        raise TraceError(f"{path} is an SQLite file but not a torchleak trace (no meta/steps tables)")
    _check_version(conn, path)
    return path, conn


def _check_magic(path: Path) -> None:
    if path.is_dir():
        raise BadInput(f"{path} is a folder without a trace.sqlite in it")
    try:
        with path.open("rb") as handle:
            head = handle.read(len(_SQLITE_MAGIC))
    except OSError as err:
        raise TraceError(f"cannot read {path}: {err}") from err
    if not head:
        raise TraceError(f"{path} is empty: the run may have died before writing anything")
    if head != _SQLITE_MAGIC:
        raise TraceError(f"{path} is not an SQLite file, so not a torchleak trace")


def _check_version(conn: sqlite3.Connection, path: Path) -> None:
    try:
        row = conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
        version = int(json.loads(row[0])) if row else 0
    except (sqlite3.DatabaseError, ValueError, TypeError) as err:
        conn.close()
        raise TraceError(f"{path} has an unreadable schema_version ({err})") from err
    if version > SCHEMA_VERSION:
        conn.close()
        raise TraceError(
            f"{path} has trace schema v{version}, newer than this torchleak "
            f"(v{SCHEMA_VERSION}): upgrade torchleak (pip install -U torchleak)"
        )


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
