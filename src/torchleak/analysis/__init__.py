"""Analysis: pure functions over a trace. Detect, attribute, advise.

``analyze(trace)`` re-runs the whole analysis on any finished (or live) trace, so
reports can always be rebuilt from the file alone.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from torchleak.analysis.series import RunData, load
from torchleak.analysis.verdict import build_report
from torchleak.report import Report

__all__ = ["analyze", "analyze_connection", "build_report", "load", "RunData"]


def analyze(trace: str | Path) -> Report:
    from torchleak.trace.reader import open_readonly, resolve_trace_path

    conn = open_readonly(resolve_trace_path(trace))
    try:
        return analyze_connection(conn)
    finally:
        conn.close()


def analyze_connection(conn: sqlite3.Connection) -> Report:
    return build_report(load(conn))
