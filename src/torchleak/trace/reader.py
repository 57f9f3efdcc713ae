"""Open a trace for reading, never for writing, with clear errors for bad files."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from torchleak.errors import InputNotFound, TraceError
from torchleak.trace.schema import SCHEMA_VERSION, TRACE_FILENAME


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


def open_readonly(path: Path) -> sqlite3.Connection:
    """A read-only connection: views can never modify a trace, even a live one."""
    uri = f"file:{path.resolve().as_posix()}?mode=ro"
    if not Path(f"{path}-wal").exists():
        # A finished trace: immutable, so SQLite leaves no -wal/-shm files beside it.
        uri += "&immutable=1"
    try:
        conn = sqlite3.connect(uri, uri=True, timeout=5.0)
        conn.row_factory = sqlite3.Row
        names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
    except sqlite3.DatabaseError as err:
        raise TraceError(f"{path} is not a torchleak trace ({err}): was the file truncated?") from err
    if "meta" not in names or "steps" not in names:
        conn.close()
        raise TraceError(f"{path} is an SQLite file but not a torchleak trace (no meta/steps tables)")
    version = _schema_version(conn)
    if version > SCHEMA_VERSION:
        conn.close()
        raise TraceError(
            f"{path} has trace schema v{version}, newer than this torchleak (v{SCHEMA_VERSION}): "
            "upgrade torchleak (pip install -U torchleak)"
        )
    return conn


def _schema_version(conn: sqlite3.Connection) -> int:
    row = conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
    return int(json.loads(row[0])) if row else 0


def read_meta(conn: sqlite3.Connection) -> dict[str, Any]:
    meta: dict[str, Any] = {}
    for key, value in conn.execute("SELECT key, value FROM meta"):
        try:
            meta[key] = json.loads(value)
        except ValueError:
            meta[key] = value
    return meta
