"""``torchleak query``: read-only SQL against a trace, the seed's ``python.torch_trace`` included.

The trace is opened read-only, and an authorizer allows reading only: no ATTACH of
other files, no writes, no schema changes, only read-only pragmas. The same file is
attached read-only as ``python`` so probing-style SQL (``FROM python.torch_trace``) runs
as written.
"""

from __future__ import annotations

import csv
import io
import json
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from torchleak.errors import BadInput
from torchleak.views.source import open_trace, trace_uri
from torchleak.views.tabular import format_table

_READ_ACTIONS = {sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_FUNCTION,
                 sqlite3.SQLITE_RECURSIVE}
_READ_PRAGMAS = {"table_info", "table_xinfo", "table_list", "index_list", "index_info",
                 "index_xinfo", "foreign_key_list", "database_list", "collation_list",
                 "function_list", "module_list", "pragma_list", "compile_options",
                 "schema_version", "user_version", "page_count", "page_size"}
_HINT = ("tables: steps, process_samples, cuda_samples, census, census_tensors, census_types, "
         "holders, marks, events, findings, meta; view: torch_trace (also as python.torch_trace)")


@dataclass
class QueryResult:
    columns: list[str]
    rows: list[tuple[Any, ...]]


def run_query(run: str | Path, sql: str) -> QueryResult:
    if not sql.strip():
        raise BadInput(f"empty query: pass SQL, e.g. \"SELECT * FROM torch_trace LIMIT 5\" ({_HINT})")
    path, conn = open_trace(run)
    try:
        conn.execute("ATTACH DATABASE ? AS python", (trace_uri(path),))
        conn.set_authorizer(_authorize)
        cursor = conn.execute(sql)
        columns = [d[0] for d in cursor.description or ()]
        rows = [tuple(r) for r in cursor.fetchall()]
    except (sqlite3.ProgrammingError, sqlite3.Warning) as err:
        raise BadInput(f"{err} (torchleak query runs one read-only statement)") from None
    except sqlite3.DatabaseError as err:
        raise BadInput(_explain(err)) from None
    finally:
        conn.close()
    return QueryResult(columns, rows)


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
        return f"SQL error: {message} ({_HINT})"
    return f"SQL error: {message}"


def format_result(result: QueryResult, fmt: str) -> str:
    if fmt == "csv":
        return _csv(result)
    if fmt == "json":
        return json.dumps([dict(zip(result.columns, row)) for row in result.rows],
                          indent=2, default=str) + "\n"
    return _table(result)


def _csv(result: QueryResult) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(result.columns)
    writer.writerows(result.rows)
    return buffer.getvalue()


def _table(result: QueryResult) -> str:
    count = len(result.rows)
    return format_table(result.columns, result.rows, f"({count} row{'s' if count != 1 else ''})")
