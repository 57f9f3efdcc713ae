"""Write a trace without blocking the training step, and never fail the training.

The recorder appends rows to in-memory lists (a list append is the whole cost on the
training thread); a background thread swaps the lists out and writes them in one
transaction every ``flush_interval`` seconds. WAL mode lets readers (``torchleak top``,
``sqlite3``) read while we write, and a ``kill -9`` loses at most the last interval.

Faults degrade, they never propagate: a busy or locked database is retried at the next
flush (the rows wait, up to ``MAX_PENDING_ROWS``; beyond that the oldest are dropped and
counted); a full disk, a vanished folder or any other write error switches the writer
off after ``MAX_FAILURES`` attempts, says so once through ``on_fault``, and from then on
rows are dropped at the cost of a list append. Nothing here raises into the caller.
"""

from __future__ import annotations

import fcntl
import json
import os
import sqlite3
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from torchleak.trace.schema import ALL_DDL, LOCK_FILENAME, SCHEMA_VERSION
from torchleak.trace.tables import APPENDED, JUDGEMENTS

_INSERT = {table.name: table.insert() for table in APPENDED}
MAX_PENDING_ROWS = 200_000  # rows waiting for a locked database, per table
MAX_FAILURES = 3  # consecutive failed flushes (other than 'busy') before switching off
BUSY_TIMEOUT = 1.0  # seconds one flush waits for another process's lock


class TraceClaimed(Exception):
    """The trace file exists already: another run owns it (or owned it)."""


def _dumps(value: Any) -> str:
    return json.dumps(value, default=str)  # ASCII: a lone surrogate becomes "\\udc80"


def _valid(text: str) -> str:
    """``text`` as valid UTF-8: a lone surrogate (a file name's undecodable byte, an
    eval's odd output) is written as its escape instead of failing the whole batch."""
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")


def valid_json(value: Any) -> str:
    """``value`` as JSON whose strings decode to valid UTF-8: a lone surrogate is kept as
    its escape written out (SQLite's ``json_extract`` would decode a JSON ``\\udcff`` escape
    into invalid text)."""
    text = json.dumps(value, default=str, ensure_ascii=False)
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return json.dumps(_valid_strings(value), default=str, ensure_ascii=False)


def _valid_strings(value: Any) -> Any:
    if isinstance(value, str):
        return _valid(value)
    if isinstance(value, dict):
        return {_valid(str(k)): _valid_strings(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_valid_strings(v) for v in value]
    return value


def _valid_row(row: Sequence[Any]) -> Sequence[Any]:
    if any(type(v) is str and not v.isascii() for v in row):
        return tuple(_valid(v) if type(v) is str else v for v in row)
    return row


def _create_exclusively(path: Path) -> None:
    """Claim ``path``: it must not exist yet (two runs never share one trace)."""
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:
        raise TraceClaimed(str(path)) from None
    os.close(fd)


def connect_for_writing(path: Path, claim: bool = True) -> sqlite3.Connection:
    """Create a trace file with the current schema (claiming it when ``claim``)."""
    if claim:
        _create_exclusively(path)
    conn = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None,
                           timeout=BUSY_TIMEOUT)
    conn.execute("PRAGMA journal_mode=WAL")
    # NORMAL: a commit survives a process kill (not a power cut), at a fraction of FULL's cost.
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.executescript(ALL_DDL)
    conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES ('schema_version', ?)",
                 (json.dumps(SCHEMA_VERSION),))
    return conn


class WriterLock:
    """An flock held while a process writes the trace; readers test it to tell a live run
    from a dead one without trusting pids (which are recycled and differ per host)."""

    def __init__(self, folder: Path) -> None:
        self._fd: int | None = None
        try:
            fd = os.open(folder / LOCK_FILENAME, os.O_CREAT | os.O_RDWR, 0o644)
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            self._fd = fd
        except OSError:
            self._fd = None  # no lock: readers fall back to the recorded pid

    def release(self) -> None:
        if self._fd is not None:
            try:
                fcntl.flock(self._fd, fcntl.LOCK_UN)
                os.close(self._fd)
            except OSError:
                pass
            self._fd = None


class TraceWriter:
    """Buffers rows per table and flushes them from a daemon thread."""

    def __init__(self, path: Path, flush_interval: float = 0.25, claim: bool = True,
                 on_fault: Callable[[str], None] | None = None) -> None:
        self.path = path
        # The lock first: a reader that finds the trace always finds its writer's lock.
        self._lock_file = WriterLock(path.parent)
        try:
            self._conn: sqlite3.Connection | None = connect_for_writing(path, claim)
        except BaseException:
            self._lock_file.release()
            raise
        self._buffers: dict[str, list[Sequence[Any]]] = {t: [] for t in _INSERT}
        self._pending: dict[str, list[Sequence[Any]]] = {t: [] for t in _INSERT}
        self._meta: dict[str, Any] = {}
        self._lock = threading.Lock()  # buffer and meta swaps
        self._write_lock = threading.Lock()  # one writer of the database at a time
        self._flush_interval = flush_interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="torchleak-writer", daemon=True)
        self._closed = False
        self._failures = 0
        self._on_fault = on_fault
        self.fault: str | None = None  # why the writer switched itself off
        self.dropped: dict[str, int] = {}

    # the training thread's side -------------------------------------------------------
    def add(self, table: str, row: Sequence[Any]) -> None:
        """``row``: the table's values in its declared order (``tables``), a plain tuple or
        the table's named row. list.append is atomic under the GIL: no lock here."""
        self._buffers[table].append(row)

    def appender(self, table: str) -> Callable[[Sequence[Any]], None]:
        """``add`` for one table, bound once: the step boundary's row costs one call. Each
        table keeps its one buffer for the writer's life (a flush takes rows off its front)."""
        return self._buffers[table].append

    def set_meta(self, key: str, value: Any) -> None:
        with self._lock:
            self._meta[key] = value

    # the writer thread ----------------------------------------------------------------
    def start(self) -> None:
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.wait(self._flush_interval):
            self.flush()

    def flush(self) -> None:
        """Write what is buffered; never raises."""
        with self._write_lock:
            with self._lock:  # held for the swaps only: set_meta never waits on a write
                for table, rows in self._buffers.items():
                    if rows:
                        # Take the rows there now off the front; what the training thread
                        # appends meanwhile stays (each step atomic under the GIL).
                        taken = rows[:]
                        del rows[:len(taken)]
                        self._pending[table].extend(taken)
                meta, self._meta = self._meta, {}
            if self.fault is not None:
                self._drop_all()
                return
            if not meta and not any(self._pending.values()):
                return
            try:
                self._write(meta)
            except Exception as err:  # noqa: BLE001 - locked, full disk, folder gone, corrupt
                with self._lock:
                    self._meta = {**meta, **self._meta}
                busy = isinstance(err, sqlite3.OperationalError) and (
                    "locked" in str(err) or "busy" in str(err))
                self._failed(err, busy)
            else:
                self._failures = 0

    def _write(self, meta: dict[str, Any]) -> None:
        conn = self._conn
        if conn is None:
            raise sqlite3.OperationalError("trace closed")
        conn.execute("BEGIN IMMEDIATE")
        try:
            for table, rows in self._pending.items():
                if rows:
                    conn.executemany(_INSERT[table], [_valid_row(r) for r in rows])
            conn.executemany("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)",
                             [(_valid(k), _dumps(v)) for k, v in meta.items()])
            conn.execute("COMMIT")
        except BaseException:
            try:
                conn.execute("ROLLBACK")
            except sqlite3.Error:
                pass
            raise
        for rows in self._pending.values():
            rows.clear()

    def _failed(self, err: BaseException, busy: bool) -> None:
        """Keep the rows for the next flush, within bounds; switch off on lasting faults."""
        for table, rows in self._pending.items():
            excess = len(rows) - MAX_PENDING_ROWS
            if excess > 0:
                del rows[:excess]  # the oldest go first: the newest say most about now
                self.dropped[table] = self.dropped.get(table, 0) + excess
        if busy:
            return  # another reader/writer holds the lock: it will let go
        self._failures += 1
        if self._failures >= MAX_FAILURES:
            self.fault = f"{type(err).__name__}: {err}"
            self._drop_all()
            if self._on_fault is not None:
                try:
                    self._on_fault(self.fault)
                except Exception:  # noqa: BLE001
                    pass

    def _drop_all(self) -> None:
        with self._lock:
            self._meta = {}
        for table in _INSERT:
            rows = self._buffers[table]
            taken = len(rows)
            del rows[:taken]
            count = len(self._pending[table]) + taken
            if count:
                self.dropped[table] = self.dropped.get(table, 0) + count
                self._pending[table] = []

    # judgements and end of run -------------------------------------------------------
    def judge(self, judgement: tuple[Any, ...]) -> None:
        """Store one phase's judgement (a ``JUDGEMENTS.row``), replacing that phase's
        previous one, in one statement; never raises."""
        with self._write_lock:
            if self.fault is not None or self._conn is None:
                return
            try:
                self._conn.execute(JUDGEMENTS.insert(), _valid_row(judgement))
            except Exception:  # noqa: BLE001 - the next write will report a lasting fault
                pass

    def stop_thread(self) -> None:
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout=5)

    def close(self) -> None:
        """Final flush, fold the WAL back (one self-contained file), release the lock."""
        if self._closed:
            return
        self._closed = True
        self.stop_thread()
        if self.dropped:
            self.set_meta("writer_dropped", dict(self.dropped))
        self.flush()
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                if self.fault is None:
                    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            except sqlite3.Error:
                pass
            finally:
                conn.close()
        self._lock_file.release()
