"""Write a trace without blocking the training step.

The recorder appends rows to in-memory lists (a list append is the whole cost on the
training thread); a background thread swaps the lists out and writes them in one
transaction every ``flush_interval`` seconds. WAL mode lets readers (``torchleak top``,
``sqlite3``) read while we write, and a ``kill -9`` loses at most the last interval.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from torchleak.trace.schema import ALL_DDL, SCHEMA_VERSION

_COLUMNS: dict[str, tuple[str, ...]] = {
    "steps": ("step", "t", "duration_ms", "epoch", "phase", "rss", "uss", "py_blocks",
              "gc_count0", "monitor_ms"),
    "process_samples": ("step", "t", "pid", "role", "rss", "uss", "pss"),
    "cuda_samples": ("step", "device", "allocated", "reserved", "active", "inactive_split",
                     "peak_allocated", "peak_reserved", "num_alloc_retries", "num_ooms",
                     "free", "total"),
    "census": ("step", "t", "duration_ms", "reason", "tensors", "tensor_bytes",
               "grad_fn_tensors", "graph_nodes", "graph_bytes", "gc_objects"),
    "census_tensors": ("step", "device", "dtype", "count", "bytes"),
    "census_types": ("step", "type_name", "count"),
    "holders": ("step", "holder", "kind", "type_name", "length", "bytes", "tensors",
                "tensor_bytes", "grad_fn_tensors", "graph_nodes", "detail"),
    "marks": ("step", "t", "name", "value"),
    "holder_walks": ("step", "kind", "reason", "duration_ms", "holders"),
    "events": ("t", "step", "kind", "source", "message"),
}
_INSERT = {
    table: f"INSERT OR REPLACE INTO {table} ({', '.join(cols)}) "
           f"VALUES ({', '.join('?' * len(cols))})"
    for table, cols in _COLUMNS.items()
}


def connect_for_writing(path: Path) -> sqlite3.Connection:
    """Create (or reopen) a trace file with the current schema."""
    conn = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    # NORMAL: a commit survives a process kill (not a power cut), at a fraction of FULL's cost.
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.executescript(ALL_DDL)
    conn.execute(
        "INSERT OR REPLACE INTO meta(key, value) VALUES ('schema_version', ?)",
        (json.dumps(SCHEMA_VERSION),),
    )
    return conn


class TraceWriter:
    """Buffers rows per table and flushes them from a daemon thread."""

    def __init__(self, path: Path, flush_interval: float = 0.25) -> None:
        self.path = path
        self._conn = connect_for_writing(path)
        self._buffers: dict[str, list[Sequence[Any]]] = {t: [] for t in _COLUMNS}
        self._meta: dict[str, Any] = {}
        self._lock = threading.Lock()
        self._flush_interval = flush_interval
        self._stop = threading.Event()
        self._after_flush: list[Callable[[], None]] = []
        self._thread = threading.Thread(target=self._loop, name="torchleak-writer", daemon=True)
        self._closed = False
        self.rows_written = 0

    def start(self) -> None:
        self._thread.start()

    def add(self, table: str, row: Sequence[Any]) -> None:
        # list.append is atomic under the GIL: no lock on the training thread.
        self._buffers[table].append(row)

    def set_meta(self, key: str, value: Any) -> None:
        with self._lock:
            self._meta[key] = value

    def every_flush(self, callback: Callable[[], None]) -> None:
        """Run ``callback`` on the writer thread after each flush (online detection)."""
        self._after_flush.append(callback)

    def _loop(self) -> None:
        while not self._stop.wait(self._flush_interval):
            self.flush()
            for callback in self._after_flush:
                callback()

    def flush(self) -> None:
        with self._lock:
            batches = {}
            for table, rows in self._buffers.items():
                if rows:
                    # Swap, so the training thread appends to a fresh list meanwhile.
                    self._buffers[table] = []
                    batches[table] = rows
            meta, self._meta = self._meta, {}
            if not batches and not meta:
                return
            self._write(batches, meta)

    def _write(self, batches: dict[str, list[Sequence[Any]]], meta: dict[str, Any]) -> None:
        conn = self._conn
        conn.execute("BEGIN")
        try:
            for table, rows in batches.items():
                conn.executemany(_INSERT[table], rows)
                self.rows_written += len(rows)
            conn.executemany(
                "INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)",
                [(k, json.dumps(v, default=str)) for k, v in meta.items()],
            )
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise

    def write_findings(self, findings: list[dict[str, Any]]) -> None:
        with self._lock:
            conn = self._conn
            conn.execute("BEGIN")
            conn.execute("DELETE FROM findings")
            conn.executemany(
                "INSERT INTO findings(kind, culprit, severity, bytes_per_step,"
                " detected_at_step, json) VALUES (?, ?, ?, ?, ?, ?)",
                [(f.get("kind"), f.get("culprit"), f.get("severity"), f.get("bytes_per_step"),
                  f.get("detected_at_step"), json.dumps(f, default=str)) for f in findings],
            )
            conn.execute("COMMIT")

    def connection(self) -> sqlite3.Connection:
        """The writer's connection, for reading back once the flush thread is stopped."""
        return self._conn

    def stop_thread(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self.stop_thread()
        self.flush()
        try:
            # Fold the WAL back so the trace is one self-contained file.
            self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        finally:
            self._conn.close()
