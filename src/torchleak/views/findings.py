"""Where a view gets the verdict and findings from, best source first.

1. a finished run's own report (``meta['report']``, written by the analysis at the end);
2. a fresh ``torchleak.analysis.analyze(trace)`` (running, killed or unanalysed runs);
3. the findings the online detection wrote to the ``findings`` table;
4. nothing: the views still draw every signal.
The analysis is imported lazily and any failure of it falls through to the next source.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import sqlite3
from pathlib import Path
from typing import Any

from torchleak.report import Finding, OomProjection, Report, Signal
from torchleak.views.source import RunState

log = logging.getLogger(__name__)

SOURCE_RECORDED = "recorded at the end of the run"
SOURCE_ANALYSIS = "analysed now"
SOURCE_ONLINE = "online detection (run not analysed yet)"
SOURCE_NONE = "no analysis available"


def load_report(state: RunState, conn: sqlite3.Connection, analyze: bool = True) -> tuple[Report | None, str]:
    recorded = report_from_dict(state.meta.get("report"))
    if recorded is not None and not state.running:
        return recorded, SOURCE_RECORDED
    if analyze:
        fresh = _analyze(state.path, conn)
        if fresh is not None:
            return fresh, SOURCE_ANALYSIS
    if recorded is not None:
        return recorded, SOURCE_RECORDED
    online = findings_from_table(conn)
    if online:
        return Report(verdict="leak", steps=state.steps, findings=online,
                      reason="findings of the online detection"), SOURCE_ONLINE
    return None, SOURCE_NONE


def _analyze(path: Path, conn: sqlite3.Connection) -> Report | None:
    try:
        import torchleak.analysis as analysis
    except ImportError:
        return None
    try:
        # On our own connection when the analysis takes one: it is opened so as to leave
        # no -wal/-shm files beside a finished trace.
        by_conn = getattr(analysis, "analyze_connection", None)
        result = by_conn(conn) if by_conn is not None else analysis.analyze(path)
    except Exception as err:  # noqa: BLE001 - views must work without the analysis
        log.info("analysis of %s failed: %s", path, err)
        return None
    if isinstance(result, Report):
        return result
    return report_from_dict(result) if isinstance(result, dict) else None


def report_from_dict(data: Any) -> Report | None:
    """A Report from its dict form, tolerant of fields this version does not know."""
    if isinstance(data, str):
        try:
            data = json.loads(data)
        except ValueError:
            return None
    if not isinstance(data, dict):
        return None
    try:
        return Report(
            verdict=str(data.get("verdict", "inconclusive")),
            steps=int(data.get("steps") or 0),
            findings=[f for f in map(finding_from_dict, data.get("findings") or []) if f],
            signals=[s for s in map(_signal_from_dict, data.get("signals") or []) if s],
            reason=str(data.get("reason", "")),
            run=dict(data.get("run") or {}),
        )
    except (TypeError, ValueError):
        return None


def finding_from_dict(data: Any) -> Finding | None:
    if not isinstance(data, dict):
        return None
    fields = {f.name for f in dataclasses.fields(Finding)}
    known = {k: v for k, v in data.items() if k in fields}
    oom = known.pop("oom", None)
    known.setdefault("kind", "unknown")
    known.setdefault("culprit", "?")
    known.setdefault("severity", "medium")
    known.setdefault("fix", "")
    try:
        return Finding(**known, oom=_oom_from_dict(oom))
    except TypeError:
        return None


def _oom_from_dict(data: Any) -> OomProjection | None:
    if not isinstance(data, dict):
        return None
    fields = {f.name for f in dataclasses.fields(OomProjection)}
    try:
        return OomProjection(**{k: v for k, v in data.items() if k in fields})
    except TypeError:
        return None


def _signal_from_dict(data: Any) -> Signal | None:
    if not isinstance(data, dict):
        return None
    fields = {f.name for f in dataclasses.fields(Signal)}
    try:
        return Signal(**{k: v for k, v in data.items() if k in fields})
    except TypeError:
        return None


def findings_from_table(conn: sqlite3.Connection) -> list[Finding]:
    try:
        rows = conn.execute("SELECT json FROM findings ORDER BY id").fetchall()
    except sqlite3.DatabaseError:
        return []
    found = []
    for (text,) in rows:
        try:
            finding = finding_from_dict(json.loads(text))
        except ValueError:
            continue
        if finding is not None:
            found.append(finding)
    return found
