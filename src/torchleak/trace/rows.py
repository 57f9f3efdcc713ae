"""The trace's rows, table by table: the only SQL the analysis depends on.

Every reader takes a cursor (``after``: a step or a rowid already seen) so the same code
serves a whole-trace analysis and a live follower that fetches only what is new. Rows
come as the table's named rows (``tables``), streamed (never the whole table in a list)
so that reading a two-million-step trace costs the same memory as reading a short one.
A table that an older trace lacks reads as empty.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from typing import Any

from torchleak.trace.tables import Table

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


def _present(conn: sqlite3.Connection, table: Table) -> list[str]:
    """The declared columns this trace's table has (an older trace may lack some)."""
    have = {r[1] for r in _rows(conn, f"PRAGMA table_info({table.name})")}
    return [c for c in table.names if c in have]


def read(conn: sqlite3.Connection, table: Table, after: int = 0,
         **equal: Any) -> Iterator[Any]:
    """``table``'s rows with ``step > after`` (and each ``column = value`` of ``equal``),
    in step order, as the table's named rows; a column an older trace lacks reads None."""
    return _named(conn, table, "step", after, equal)


def read_new(conn: sqlite3.Connection, table: Table, after_rowid: int = 0,
             **equal: Any) -> Iterator[tuple[int, Any]]:
    """(rowid, named row) of the rows written after ``after_rowid``, in write order: for
    tables whose step is not unique (samples, marks, events)."""
    return _named(conn, table, "rowid", after_rowid, equal, with_rowid=True)


def _named(conn: sqlite3.Connection, table: Table, cursor: str, after: int,
           equal: dict[str, Any], with_rowid: bool = False) -> Iterator[Any]:
    present = _present(conn, table)
    if not present:
        return
    where = " AND ".join([f"{cursor} > ?"] + [f"{name} = ?" for name in equal])
    select = (["rowid"] if with_rowid else []) + present
    sql = f"SELECT {', '.join(select)} FROM {table.name} WHERE {where} ORDER BY {cursor}"
    found = _rows(conn, sql, (after, *equal.values()))
    if len(present) < len(table.names):  # an older trace: the columns it lacks read None
        place = [present.index(c) if c in present else -1 for c in table.names]
        found = (values[:1] + tuple(None if i < 0 else values[i + 1] for i in place)
                 if with_rowid else tuple(None if i < 0 else values[i] for i in place)
                 for values in found)
    make = table.row._make
    for values in found:
        yield (values[0], make(values[1:])) if with_rowid else make(values)


def findings(conn: sqlite3.Connection, phase: str | None = None) -> list[Row]:
    """(phase, step, json) of the recorded findings, in the order they were written."""
    columns = {r[1] for r in _rows(conn, "PRAGMA table_info(findings)")}
    if "phase" not in columns:  # a first-version trace: its findings were the final ones
        found = [("final", None, r[0]) for r in _rows(conn, "SELECT json FROM findings "
                                                            "ORDER BY id")]
        return [r for r in found if phase in (None, "final")]
    if phase is None:
        return list(_rows(conn, "SELECT phase, step, json FROM findings ORDER BY phase, id"))
    return list(_rows(conn, "SELECT phase, step, json FROM findings WHERE phase = ? "
                            "ORDER BY id", (phase,)))


def last_step(conn: sqlite3.Connection) -> int:
    row = next(_rows(conn, "SELECT MAX(step) FROM steps"), (None,))
    return int(row[0] or 0)


def peak(conn: sqlite3.Connection, table: str, column: str) -> float | None:
    """The largest value of one column (None when the table is empty or absent)."""
    row = next(_rows(conn, f"SELECT MAX({column}) FROM {table}"), (None,))
    return None if row[0] is None else float(row[0])
