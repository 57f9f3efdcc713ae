"""Read-only SQL against a trace, ``python.torch_trace`` included.

The trace is opened read-only (``reader.open_trace``), and an authorizer allows reading
only: no ATTACH of other files, no writes, no schema changes, only read-only pragmas.
The same file is attached read-only as ``python``, so SQL written against
``python.torch_trace`` runs as written. A progress handler stops a runaway query at
``timeout`` seconds or on Ctrl-C.
"""

from __future__ import annotations

import signal
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from torchleak.errors import BadInput
from torchleak.trace.reader import open_trace

_READ_ACTIONS = {sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_FUNCTION,
                 sqlite3.SQLITE_RECURSIVE}
_READ_PRAGMAS = {"table_info", "table_xinfo", "table_list", "index_list", "index_info",
                 "index_xinfo", "foreign_key_list", "database_list", "collation_list",
                 "function_list", "module_list", "pragma_list", "compile_options",
                 "schema_version", "user_version", "page_count", "page_size"}
HINT = ("tables: steps, process_samples, heap_samples, cuda_samples, census, census_tensors, "
        "census_types, holders, holder_walks, marks, events, findings, breakdown, meta; "
        "view: torch_trace (also as python.torch_trace)")
MAX_ROWS = 1_000_000


@dataclass
class QueryResult:
    columns: list[str]
    rows: list[tuple[Any, ...]]
    truncated: bool = False


def run_query(trace: str | Path, sql: str, timeout: float = 60.0) -> QueryResult:
    if not sql.strip():
        raise BadInput(f"empty query: pass SQL, e.g. \"SELECT * FROM torch_trace LIMIT 5\" ({HINT})")
    with open_trace(trace) as opened, _Stop(time.monotonic() + timeout) as stop:
        conn = opened.conn
        try:
            conn.execute("ATTACH DATABASE ? AS python", (opened.attach_uri,))
            conn.set_authorizer(_authorize)
            conn.set_progress_handler(stop.check, 10_000)
            cursor = conn.execute(sql)
            columns = [d[0] for d in cursor.description or ()]
            rows = [tuple(r) for r in cursor.fetchmany(MAX_ROWS + 1)]
        except (sqlite3.ProgrammingError, sqlite3.Warning) as err:
            raise BadInput(f"{err} (torchleak query runs one read-only statement)") from None
        except sqlite3.OperationalError as err:
            if stop.interrupted:
                raise KeyboardInterrupt from None
            if "interrupted" in str(err):
                raise BadInput(f"the query ran longer than {timeout:g} s and was stopped "
                               "(raise --timeout, or add a LIMIT)") from None
            raise BadInput(_explain(err)) from None
        except sqlite3.DatabaseError as err:
            raise BadInput(_explain(err)) from None
        except UnicodeDecodeError as err:  # a name in a damaged view, quoted by SQLite
            raise BadInput(f"the trace's schema is damaged ({err}): query its tables, "
                           "not its views") from None
        if stop.interrupted:
            raise KeyboardInterrupt
    return QueryResult(columns, rows[:MAX_ROWS], truncated=len(rows) > MAX_ROWS)


class _Stop:
    """Called by SQLite every few thousand steps: a past deadline or Ctrl-C stops it.

    SQLite swallows an exception raised inside this callback, so Ctrl-C is caught by a
    handler that only sets a flag, and re-raised once SQLite has stopped."""

    def __init__(self, deadline: float) -> None:
        self.deadline = deadline
        self.interrupted = False
        self._previous: object = None

    def __enter__(self) -> _Stop:
        try:
            self._previous = signal.signal(signal.SIGINT, self._on_sigint)
        except ValueError:  # not the main thread: no Ctrl-C to catch here
            self._previous = None
        return self

    def __exit__(self, *exc: object) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)  # type: ignore[arg-type]

    def _on_sigint(self, signum: int, frame: object) -> None:
        self.interrupted = True

    def check(self) -> int:
        return int(self.interrupted or time.monotonic() > self.deadline)


def _authorize(action: int, arg1: str | None, arg2: str | None, _db: str | None,
               _trigger: str | None) -> int:
    if action in _READ_ACTIONS:
        return sqlite3.SQLITE_OK
    if action == sqlite3.SQLITE_PRAGMA and (arg1 or "").lower() in _READ_PRAGMAS:
        return sqlite3.SQLITE_OK
    return sqlite3.SQLITE_DENY


def _explain(err: sqlite3.DatabaseError) -> str:
    message = str(err)
    if "not authorized" in message or "readonly" in message:
        return "torchleak query is read-only: use SELECT / WITH (the trace is never modified)"
    if "no such table" in message or "no such column" in message:
        return f"SQL error: {message} ({HINT})"
    return f"SQL error: {message}"
