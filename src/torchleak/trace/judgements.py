"""The run's judgements, stored and read in one place: one row per phase (``live``, the
detector's latest pass; ``final``, the end-of-run report) in the ``judgements`` table.

``judgement`` is the one reader. Traces written before that table (schema 2 and older)
kept the same things in ``meta['report']``, ``meta['live']`` and a ``findings`` table;
they are read through the same function.
"""

from __future__ import annotations

import sqlite3
import time
from dataclasses import dataclass, field
from typing import Any

from torchleak.errors import TraceError
from torchleak.trace.reader import parse_json
from torchleak.trace.rows import findings
from torchleak.trace.tables import JUDGEMENTS
from torchleak.trace.writer import valid_json

PHASES = ("live", "final")


@dataclass
class Judgement:
    phase: str  # 'live' | 'final'
    step: int | None  # the last step the analysis saw
    t: float | None
    verdict: str
    reason: str = ""
    tier: str | None = None  # live: 'none' | 'suspected' | 'called'
    calls: list[dict[str, Any]] = field(default_factory=list)  # live: the leaks called
    suspects: int = 0
    report: dict[str, Any] | None = None  # the Report's JSON (when asked for)


def judgement_row(phase: str, step: int, report: dict[str, Any], tier: str | None = None,
                  calls: list[dict[str, Any]] | None = None,
                  suspects: int | None = None) -> tuple[Any, ...]:
    """The ``judgements`` row of one phase's Report (its ``to_dict()``)."""
    return JUDGEMENTS.row(
        phase=phase, step=step, t=time.time(), verdict=report.get("verdict"),
        reason=report.get("reason"), tier=tier,
        calls=None if calls is None else valid_json(calls), suspects=suspects,
        report=valid_json(report))


def stored(conn: sqlite3.Connection) -> bool:
    """Whether the trace has the ``judgements`` table (schema 3 and later)."""
    return conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = "
                        "'judgements'").fetchone() is not None


def judgement(conn: sqlite3.Connection, phase: str, report: bool = True) -> Judgement | None:
    """The trace's ``phase`` judgement (with its Report's JSON when ``report``); None when
    that phase has none (the run still going, killed before its end, never analysed)."""
    try:
        return _judgement(conn, phase, report)
    except sqlite3.DatabaseError as err:  # damaged bytes: one clear line, as for meta
        raise TraceError(f"cannot read the trace's {phase} judgement ({err})") from None


def _judgement(conn: sqlite3.Connection, phase: str, report: bool) -> Judgement | None:
    if not stored(conn):
        return _from_meta(conn, phase, report)
    row = conn.execute("SELECT step, t, verdict, reason, tier, calls, suspects, %s FROM "
                       "judgements WHERE phase = ?" % ("report" if report else "NULL"),
                       (phase,)).fetchone()
    if row is None or not isinstance(row[2], str):
        return None
    step, t, verdict, reason, tier, calls, suspects, text = row
    parsed = parse_json(text) if isinstance(text, str) else None
    listed = parse_json(calls) if isinstance(calls, str) else None
    return Judgement(phase, step if isinstance(step, int) else None, _number(t), verdict,
                     str(reason or ""), tier if isinstance(tier, str) else None,
                     [c for c in listed if isinstance(c, dict)] if isinstance(listed, list)
                     else [], suspects if isinstance(suspects, int) else 0,
                     parsed if isinstance(parsed, dict) else None)


def _from_meta(conn: sqlite3.Connection, phase: str, report: bool) -> Judgement | None:
    """A schema-2 trace: ``meta['report']`` was the final judgement, ``meta['live']`` the
    live one's summary, its findings in the ``findings`` table."""
    key = "report" if phase == "final" else "live"
    row = conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
    value = parse_json(row[0]) if row and isinstance(row[0], str) else None
    if not isinstance(value, dict) or not isinstance(value.get("verdict"), str):
        return None
    step = value.get("steps" if phase == "final" else "step")
    found = Judgement(phase, step if isinstance(step, int) else None, _number(value.get("t")),
                      value["verdict"], str(value.get("reason") or ""))
    if phase == "final":
        found.report = value if report else None
        return found
    tier, calls, suspects = value.get("tier"), value.get("calls"), value.get("suspects")
    found.tier = tier if isinstance(tier, str) else None
    found.calls = [c for c in calls if isinstance(c, dict)] if isinstance(calls, list) else []
    found.suspects = suspects if isinstance(suspects, int) else 0
    if report:
        found.report = {"verdict": found.verdict, "reason": found.reason, "steps": step,
                        "findings": [f for f in (parse_json(text) for _p, _s, text
                                                 in findings(conn, "live"))
                                     if isinstance(f, dict)]}
    return found


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) \
        else None
