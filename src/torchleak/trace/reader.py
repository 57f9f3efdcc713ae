"""Open a trace for reading, never for writing, with clear errors for bad files.

Reading must leave a run folder byte for byte as it was:
- a trace whose writer is alive is opened ``mode=ro``: it reads the writer's WAL through
  the shared-memory file the writer itself keeps;
- a trace nobody writes (finished, crashed, killed) with no WAL beside it is opened
  ``immutable``, so SQLite creates no ``-wal``/``-shm`` files;
- a dead writer's leftover WAL (a killed run: its last commits live there) is read in
  place with ``readonly_shm``: SQLite opens the shared-memory file read-only and, with
  no writer to vouch for it, builds the WAL's index in its own memory; nothing is
  copied and no byte changes;
- only when that shared-memory file is missing (a folder copied without it) is the trace
  read from a private copy of the two files, and then only when the temporary folder
  has room for it (else one line says where to make room).
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import shutil
import sqlite3
import tempfile
from pathlib import Path
from types import TracebackType
from typing import Any
from urllib.parse import quote

from torchleak.errors import BadInput, InputNotFound, TraceError
from torchleak.trace.schema import LOCK_FILENAME, SCHEMA_VERSION, TRACE_FILENAME
from torchleak.units import format_bytes

_SQLITE_MAGIC = b"SQLite format 3\x00"
_COPY_MARGIN = 1 << 20  # bytes beyond the copy itself: SQLite's own scratch
MAX_META_VALUE = 4_000_000  # characters: a bigger value is not ours and is skipped


def resolve_trace_path(run: str | Path) -> Path:
    """Accept a run folder or a trace file; return the trace file."""
    path = Path(run)
    if path.is_dir():
        path = path / TRACE_FILENAME
    if not path.exists():
        raise InputNotFound(f"no trace at {path}: pass a run folder made by `torchleak run` "
                            "(see `torchleak ls`) or its trace.sqlite")
    return path


def writer_alive(trace: Path) -> bool | None:
    """Whether a process still writes ``trace``: True/False from the writer's lock file,
    None when there is no lock file to ask (then the recorded pid is the only clue)."""
    lock = trace.parent / LOCK_FILENAME
    try:
        fd = os.open(lock, os.O_RDONLY)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return None
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)


class Trace:
    """A read-only connection to one trace; a context manager that cleans up after itself."""

    def __init__(self, path: Path, conn: sqlite3.Connection, live: bool, attach_uri: str,
                 scratch: str | None = None) -> None:
        self.path = path
        self.conn = conn
        self.live = live
        self.attach_uri = attach_uri  # the same file, for ATTACH (read-only as well)
        self._scratch = scratch

    def close(self) -> None:
        try:
            self.conn.close()
        finally:
            if self._scratch is not None:
                shutil.rmtree(self._scratch, ignore_errors=True)
                self._scratch = None

    def __enter__(self) -> Trace:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


def open_trace(run: str | Path) -> Trace:
    """Resolve ``run`` (folder or file) and open its trace read-only, checking it is ours."""
    path = resolve_trace_path(run)
    _check_magic(path)
    wal = Path(f"{path}-wal")
    alive = writer_alive(path)
    if alive is None:  # no lock file: an older trace, or a writer that could not lock
        alive = wal.exists() and _pid_alive(path)
    if alive:
        uri = _uri(path, "mode=ro")
        return Trace(path, _connect(path, uri), live=True, attach_uri=uri)
    if wal.exists() and wal.stat().st_size > 0:
        if Path(f"{path}-shm").exists():
            uri = _uri(path, "mode=ro&readonly_shm=1")
            return Trace(path, _connect(path, uri), live=False, attach_uri=uri)
        return _open_copy(path, wal)
    uri = _uri(path, "mode=ro&immutable=1")
    return Trace(path, _connect(path, uri), live=False, attach_uri=uri)


def _open_copy(path: Path, wal: Path) -> Trace:
    """A dead writer's WAL without its shared-memory file: read it from a private copy
    (SQLite would create the missing file beside the trace)."""
    need = path.stat().st_size + wal.stat().st_size
    tmp = tempfile.gettempdir()
    if shutil.disk_usage(tmp).free < need + _COPY_MARGIN:
        raise TraceError(_no_room(path, tmp, need))
    scratch = tempfile.mkdtemp(prefix="torchleak-read-")
    try:
        copy = Path(scratch) / TRACE_FILENAME
        shutil.copyfile(path, copy)
        shutil.copyfile(wal, f"{copy}-wal")
        conn = _connect(path, str(copy), uri=False)
    except OSError as err:
        shutil.rmtree(scratch, ignore_errors=True)
        if err.errno == errno.ENOSPC:
            raise TraceError(_no_room(path, tmp, need)) from None
        raise
    except TraceError:
        shutil.rmtree(scratch, ignore_errors=True)
        raise
    return Trace(path, conn, live=False, attach_uri=_uri(copy, "mode=ro"), scratch=scratch)


def _no_room(path: Path, tmp: str, need: int) -> str:
    return (f"{path} was left by a killed run without its -shm file, so reading it needs a "
            f"private copy ({format_bytes(need)}) and {tmp} has less room than that: set "
            "TMPDIR to a folder with room, or free space there")


def readonly_uri(path: Path) -> str:
    """The URI a live reader in the writer's own process uses (the live detector)."""
    return _uri(path, "mode=ro")


def _uri(path: Path, flags: str) -> str:
    return f"file:{quote(path.resolve().as_posix())}?{flags}"


def _connect(path: Path, target: str, uri: bool = True) -> sqlite3.Connection:
    try:
        conn = sqlite3.connect(target, uri=uri, timeout=5.0, check_same_thread=False)
        conn.text_factory = _text
        conn.execute("PRAGMA query_only=ON")
        names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
    except (sqlite3.DatabaseError, UnicodeDecodeError) as err:
        # (the latter: SQLite's message names a damaged schema entry, bytes and all)
        raise TraceError(f"{path} is not a readable torchleak trace ({err}): was it "
                         "truncated?") from None
    if "meta" not in names or "steps" not in names:
        conn.close()
        raise TraceError(f"{path} is an SQLite file but not a torchleak trace (no "
                         "meta/steps tables)")
    _check_version(conn, path)
    return conn


def _text(raw: bytes) -> str:
    """A TEXT value as a string, damaged bytes shown as U+FFFD: a name with a scribbled
    byte reads as what is left of it in every view, never as an error (~0.1 s a million
    values more than strict decoding)."""
    return raw.decode("utf-8", "replace")


def _check_magic(path: Path) -> None:
    if path.is_dir():
        raise BadInput(f"{path} is a folder without a trace.sqlite in it")
    try:
        with path.open("rb") as handle:
            head = handle.read(len(_SQLITE_MAGIC))
    except OSError as err:
        raise TraceError(f"cannot read {path}: {err.strerror or err}") from None
    if not head:
        raise TraceError(f"{path} is empty: the run may have died before writing anything")
    if head != _SQLITE_MAGIC:
        raise TraceError(f"{path} is not an SQLite file, so not a torchleak trace")


def _check_version(conn: sqlite3.Connection, path: Path) -> None:
    try:
        row = conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
        version = int(json.loads(row[0])) if row else 0
    except (sqlite3.DatabaseError, ValueError, TypeError, RecursionError) as err:
        conn.close()
        raise TraceError(f"{path} has an unreadable schema_version ({err})") from None
    if version > SCHEMA_VERSION:
        conn.close()
        raise TraceError(f"{path} has trace schema v{version}, newer than this torchleak "
                         f"(v{SCHEMA_VERSION}): upgrade torchleak (pip install -U torchleak)")


def parse_json(value: Any) -> Any:
    """A meta value as JSON when it is JSON, else the text itself (never raises)."""
    if not isinstance(value, (str, bytes)):
        return value
    try:
        return json.loads(value)
    except (ValueError, RecursionError):
        return value


def read_meta(conn: sqlite3.Connection) -> dict[str, Any]:
    """Every meta key; values too big or too deep to be ours are skipped."""
    meta: dict[str, Any] = {}
    try:
        rows = conn.execute("SELECT key, CASE WHEN length(value) > ? THEN NULL ELSE value END "
                            "FROM meta", (MAX_META_VALUE,)).fetchall()
    except sqlite3.DatabaseError as err:
        raise TraceError(f"cannot read the trace's metadata ({err})") from None
    for key, value in rows:
        if isinstance(key, str) and value is not None:
            meta[key] = parse_json(value)
    return meta


def _pid_alive(path: Path) -> bool:
    """Older traces without a lock file: is the recorded pid still running?"""
    try:
        conn = sqlite3.connect(_uri(path, "mode=ro&immutable=1"), uri=True)
        try:
            row = conn.execute("SELECT value FROM meta WHERE key='pid'").fetchone()
        finally:
            conn.close()
        pid = int(json.loads(row[0])) if row else 0
    except (sqlite3.DatabaseError, ValueError, TypeError, RecursionError):
        return False
    return pid_alive(pid)


def pid_alive(pid: int) -> bool:
    """Whether a process of that pid exists on this machine."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
