"""Open a trace for reading, never for writing, with clear errors for bad files.

A finished trace (no ``-wal`` file beside it: nobody is writing) is opened ``immutable``
so SQLite leaves no ``-wal``/``-shm`` files behind; a trace being written is opened
``mode=ro``, which reads the writer's WAL through its shared memory.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any
from urllib.parse import quote

from torchleak.errors import BadInput, InputNotFound, TraceError
from torchleak.trace.schema import SCHEMA_VERSION, TRACE_FILENAME

_SQLITE_MAGIC = b"SQLite format 3\x00"


def resolve_trace_path(run: str | Path) -> Path:
    """Accept a run folder or a trace file; return the trace file."""
    path = Path(run)
    if path.is_dir():
        path = path / TRACE_FILENAME
    if not path.exists():
        raise InputNotFound(
            f"no trace at {path}: pass a run folder made by `torchleak run` "
            "(see `torchleak ls`) or its trace.sqlite"
        )
    return path


def trace_uri(path: Path, live: bool | None = None) -> str:
    """The read-only URI for a trace: immutable when no writer's WAL is beside the file."""
    resolved = path.resolve()
    if live is None:
        live = Path(f"{resolved}-wal").exists()
    flags = "mode=ro" if live else "mode=ro&immutable=1"
    return f"file:{quote(resolved.as_posix())}?{flags}"


def open_readonly(path: Path) -> sqlite3.Connection:
    """A read-only connection: views can never modify a trace, even a live one."""
    _check_magic(path)
    if "immutable" in trace_uri(path):
        # No WAL beside it: finished, or caught in the instant between the file's creation
        # and the writer's first commit, where an immutable view would miss every later one.
        try:
            conn = _connect(path, live=False)
        except TraceError:
            return _connect(path, live=True)
        if not _still_running(conn):
            return conn
        conn.close()
    return _connect(path, live=True)


def _still_running(conn: sqlite3.Connection) -> bool:
    try:
        row = conn.execute("SELECT value FROM meta WHERE key='status'").fetchone()
    except sqlite3.DatabaseError:
        return True
    return row is None or json.loads(row[0]) == "running"


def _connect(path: Path, live: bool | None) -> sqlite3.Connection:
    try:
        conn = sqlite3.connect(trace_uri(path, live), uri=True, timeout=5.0)
        conn.row_factory = sqlite3.Row
        conn.execute("PRAGMA query_only=ON")
        names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
    except sqlite3.DatabaseError as err:
        raise TraceError(f"{path} is not a readable torchleak trace ({err}): was it truncated?") from err
    if "meta" not in names or "steps" not in names:
        conn.close()
        raise TraceError(f"{path} is an SQLite file but not a torchleak trace (no meta/steps tables)")
    _check_version(conn, path)
    return conn


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


def read_meta(conn: sqlite3.Connection) -> dict[str, Any]:
    meta: dict[str, Any] = {}
    for key, value in conn.execute("SELECT key, value FROM meta"):
        try:
            meta[key] = json.loads(value)
        except ValueError:
            meta[key] = value
    return meta
