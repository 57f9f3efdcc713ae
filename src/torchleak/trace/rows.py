"""The trace's rows, table by table: the only SQL the analysis depends on.

Every reader takes a cursor (``after``: a step or a rowid already seen) so the same code
serves a whole-trace analysis and a live follower that fetches only what is new. Rows
come as plain tuples in a fixed column order, streamed (never the whole table in a list)
so that reading a two-million-step trace costs the same memory as reading a short one.
A table that an older trace lacks reads as empty.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from typing import Any

Row = tuple[Any, ...]


def _rows(conn: sqlite3.Connection, sql: str, params: tuple[Any, ...] = ()) -> Iterator[Row]:
    try:
        cursor = conn.execute(sql, params)
    except sqlite3.OperationalError as err:
        if "no such table" in str(err) or "no such column" in str(err):
            return
        raise
    while True:
        batch = cursor.fetchmany(4096)
        if not batch:
            return
        yield from batch


def steps(conn: sqlite3.Connection, after: int = 0) -> Iterator[Row]:
    """(step, t, duration_ms, epoch, phase, rss, uss, monitor_ms)"""
    return _rows(conn, "SELECT step, t, duration_ms, epoch, phase, rss, uss, monitor_ms "
                       "FROM steps WHERE step > ? ORDER BY step", (after,))


def process_samples(conn: sqlite3.Connection, role: str, after_rowid: int = 0) -> Iterator[Row]:
    """(rowid, step, t, pid, rss, uss, pss) in time order."""
    return _rows(conn, "SELECT rowid, step, t, pid, rss, uss, pss FROM process_samples "
                       "WHERE role = ? AND rowid > ? ORDER BY rowid", (role, after_rowid))


def heap_samples(conn: sqlite3.Connection, after_rowid: int = 0) -> Iterator[Row]:
    """(rowid, step, t, py_blocks, malloc_in_use, malloc_free, malloc_mmapped)"""
    return _rows(conn, "SELECT rowid, step, t, py_blocks, malloc_in_use, malloc_free, "
                       "malloc_mmapped FROM heap_samples WHERE rowid > ? ORDER BY rowid",
                 (after_rowid,))


def cuda_samples(conn: sqlite3.Connection, device: int = 0, after: int = 0) -> Iterator[Row]:
    """(step, allocated, reserved, inactive_split, num_alloc_retries, num_ooms, free, total)"""
    return _rows(conn, "SELECT step, allocated, reserved, inactive_split, num_alloc_retries, "
                       "num_ooms, free, total FROM cuda_samples WHERE device = ? AND step > ? "
                       "ORDER BY step", (device, after))


def census(conn: sqlite3.Connection, after: int = 0) -> Iterator[Row]:
    """(step, tensors, tensor_bytes, grad_fn_tensors, graph_nodes, graph_bytes, gc_objects,
    duration_ms)"""
    return _rows(conn, "SELECT step, tensors, tensor_bytes, grad_fn_tensors, graph_nodes, "
                       "graph_bytes, gc_objects, duration_ms FROM census WHERE step > ? "
                       "ORDER BY step", (after,))


def breakdown(conn: sqlite3.Connection, after: int = 0) -> Iterator[Row]:
    """(step, category, bytes)"""
    return _rows(conn, "SELECT step, category, bytes FROM breakdown WHERE step > ? "
                       "ORDER BY step", (after,))


def holders(conn: sqlite3.Connection, after: int = 0) -> Iterator[Row]:
    """(step, holder, kind, type_name, length, bytes, tensors, grad_fn_tensors, graph_nodes,
    detail)"""
    return _rows(conn, "SELECT step, holder, kind, type_name, length, bytes, tensors, "
                       "grad_fn_tensors, graph_nodes, detail FROM holders WHERE step > ? "
                       "ORDER BY step", (after,))


def holder_walks(conn: sqlite3.Connection, after: int = 0) -> Iterator[Row]:
    """(step, kind, reason, duration_ms, holders)"""
    return _rows(conn, "SELECT step, kind, reason, duration_ms, holders FROM holder_walks "
                       "WHERE step > ? ORDER BY step", (after,))


def marks(conn: sqlite3.Connection, after_rowid: int = 0) -> Iterator[Row]:
    """(rowid, step, t, name, value)"""
    return _rows(conn, "SELECT rowid, step, t, name, value FROM marks WHERE rowid > ? "
                       "ORDER BY rowid", (after_rowid,))


def events(conn: sqlite3.Connection, after_rowid: int = 0) -> Iterator[Row]:
    """(rowid, t, step, kind, source, message)"""
    return _rows(conn, "SELECT rowid, t, step, kind, source, message FROM events "
                       "WHERE rowid > ? ORDER BY rowid", (after_rowid,))


def findings(conn: sqlite3.Connection, phase: str | None = None) -> list[Row]:
    """(phase, step, json) of the recorded findings, in the order they were written."""
    columns = {r[1] for r in _rows(conn, "PRAGMA table_info(findings)")}
    if "phase" not in columns:  # a first-version trace: its findings were the final ones
        found = [("final", None, r[0]) for r in _rows(conn, "SELECT json FROM findings "
                                                            "ORDER BY id")]
        return [r for r in found if phase in (None, "final")]
    if phase is None:
        return list(_rows(conn, "SELECT phase, step, json FROM findings ORDER BY id"))
    return list(_rows(conn, "SELECT phase, step, json FROM findings WHERE phase = ? "
                            "ORDER BY id", (phase,)))


def last_step(conn: sqlite3.Connection) -> int:
    row = next(_rows(conn, "SELECT MAX(step) FROM steps"), (None,))
    return int(row[0] or 0)


def peak(conn: sqlite3.Connection, table: str, column: str) -> float | None:
    """The largest value of one column (None when the table is empty or absent)."""
    row = next(_rows(conn, f"SELECT MAX({column}) FROM {table}"), (None,))
    return None if row[0] is None else float(row[0])
