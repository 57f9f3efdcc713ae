"""The trace's rows, table by table: the only SQL the analysis depends on.

Every reader takes a cursor (``after``: a step or a rowid already seen) so the same code
serves a whole-trace analysis and a live follower that fetches only what is new. Rows
come as the table's named rows (``tables``), streamed (never the whole table in a list)
so that reading a two-million-step trace costs the same memory as reading a short one.
A table that an older trace lacks reads as empty.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator
from contextvars import ContextVar
from typing import Any

from torchleak.trace import tables
from torchleak.trace.tables import Table

Row = tuple[Any, ...]


def _rows(conn: sqlite3.Connection, sql: str, params: tuple[Any, ...] = ()) -> Iterator[Row]:
    try:
        cursor = conn.execute(sql, params)
    except sqlite3.OperationalError as err:
        if "no such table" in str(err) or "no such column" in str(err):
            return
        raise
    except UnicodeDecodeError as err:  # SQLite's message quotes a damaged view's bytes
        raise sqlite3.DatabaseError(f"the trace's schema is damaged ({err})") from None
    while True:
        batch = cursor.fetchmany(4096)
        if not batch:
            return
        yield from batch


# The columns each table was found to have, while a reader of one trace keeps them
# (``columns_known``): a live follower reads a dozen tables every few seconds, and asking
# SQLite for each one's columns every time was an eighth of its pass.
_KNOWN: ContextVar[dict[str, list[str]] | None] = ContextVar("torchleak_columns", default=None)


@contextlib.contextmanager
def columns_known(known: dict[str, list[str]]) -> Iterator[None]:
    """Within this block, each table's columns are asked once and kept in ``known`` (one
    trace's: its tables do not change while it is read)."""
    token = _KNOWN.set(known)
    try:
        yield
    finally:
        _KNOWN.reset(token)


def _present(conn: sqlite3.Connection, table: Table) -> list[str]:
    """The declared columns this trace's table has (an older trace may lack some)."""
    known = _KNOWN.get()
    if known is not None and table.name in known:
        return known[table.name]
    have = {r[1] for r in _rows(conn, f"PRAGMA table_info({table.name})")}
    present = [c for c in table.names if c in have]
    if known is not None and present:  # an absent table may be created yet: asked again
        known[table.name] = present
    return present


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


def step_totals(conn: sqlite3.Connection, after: int) -> tuple[int, float, float]:
    """(the last step, the steps' summed ``duration_ms``, their summed ``monitor_ms``) of
    the steps after ``after``: summed by SQLite, a fast loop writes thousands a second."""
    number = "CASE WHEN typeof({0}) IN ('integer', 'real') THEN {0} END"
    have = set(_present(conn, tables.STEPS))
    sums = [f"TOTAL({number.format(c)})" if c in have else "0.0"
            for c in ("duration_ms", "monitor_ms")]
    row = next(_rows(conn, f"SELECT MAX(step), {', '.join(sums)} FROM steps WHERE step > ?",
                     (after,)), (None, 0.0, 0.0))
    last = row[0] if isinstance(row[0], int) else after
    return last, float(row[1] or 0.0), float(row[2] or 0.0)


def step_readings(conn: sqlite3.Connection, after: int) -> Iterator[tuple[Any, Any, Any]]:
    """(step, rss, uss) of the steps after ``after`` that read the memory (a fast loop's
    steps between readings have none)."""
    return _rows(conn, "SELECT step, rss, uss FROM steps WHERE step > ? AND (uss IS NOT NULL "
                       "OR rss IS NOT NULL) ORDER BY step", (after,))


def recent_step_times(conn: sqlite3.Connection, after: int, count: int
                      ) -> list[tuple[Any, Any]]:
    """(duration_ms, monitor_ms) of the last ``count`` steps after ``after``, in order."""
    monitor = "monitor_ms" if "monitor_ms" in _present(conn, tables.STEPS) else "NULL"
    found = list(_rows(conn, f"SELECT duration_ms, {monitor} FROM steps WHERE step > ? "
                             "ORDER BY step DESC LIMIT ?", (after, count)))
    found.reverse()
    return found


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
