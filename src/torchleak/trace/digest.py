"""A trace read in a few aggregate queries: what the cross-rank view needs of one rank.

A job of a thousand ranks cannot afford to parse every rank's stored report or stream
every rank's rows into Python. These queries let SQLite do the work in C, one pass each:
the small metadata keys, a few fields of the stored final report (``json_extract``), and the main process' memory peak and growth (``main_growth``).
"""

from __future__ import annotations

import sqlite3
from typing import Any

from torchleak.trace import judgements
from torchleak.trace.reader import parse_json

# Keys whose values are whole reports (traces from before the ``judgements`` table): read
# in parts, never whole.
BIG_META = ("report",)


def small_meta(conn: sqlite3.Connection, keys: tuple[str, ...] | None = None) -> dict[str, Any]:
    """The meta keys named (default: every key but the stored report), each small."""
    if keys is None:
        sql = "SELECT key, value FROM meta WHERE key NOT IN (%s) AND length(value) < 100000"
        params: tuple[str, ...] = BIG_META
    else:
        sql = "SELECT key, value FROM meta WHERE key IN (%s) AND length(value) < 100000"
        params = keys
    rows = conn.execute(sql % ",".join("?" * len(params)), params).fetchall()
    return {k: parse_json(v) for k, v in rows if isinstance(k, str) and v is not None}


def _final_report(conn: sqlite3.Connection) -> str:
    """A subquery whose one ``value`` is the stored final report's JSON (the
    ``judgements`` row; ``meta['report']`` in a trace from before that table)."""
    if judgements.stored(conn):
        return "SELECT report AS value FROM judgements WHERE phase = 'final'"
    return "SELECT value FROM meta WHERE key = 'report'"


def report_parts(conn: sqlite3.Connection) -> dict[str, Any] | None:
    """The stored report's verdict, steps, reason, main USS slope and RSS peak; None when
    the run stored no report."""
    row = conn.execute(
        "SELECT json_extract(r.value, '$.verdict'), json_extract(r.value, '$.steps'), "
        "json_extract(r.value, '$.reason'), "
        "(SELECT json_extract(s.value, '$.slope_per_step') FROM json_each(r.value, "
        "'$.signals') AS s WHERE json_extract(s.value, '$.name') = 'main_uss'), "
        "(SELECT json_extract(s.value, '$.peak_value') FROM json_each(r.value, "
        "'$.signals') AS s WHERE json_extract(s.value, '$.name') = 'main_rss') "
        "FROM (%s) AS r WHERE json_valid(r.value)" % _final_report(conn)).fetchone()
    if row is None or row[0] is None:
        return None
    verdict, steps, reason, slope, peak = row
    return {"verdict": str(verdict), "steps": steps if isinstance(steps, int) else 0,
            "reason": str(reason or ""), "main_uss_slope": _num(slope), "main_rss_peak": _num(peak)}


def report_findings(conn: sqlite3.Connection, severities: tuple[str, ...]) -> list[str]:
    """The stored report's findings of these severities, each as its JSON text."""
    return [r[0] for r in conn.execute(
        "SELECT f.value FROM (%s) AS r, json_each(r.value, '$.findings') AS f WHERE "
        "json_valid(r.value) AND json_extract(f.value, '$.severity') IN (%s)"
        % (_final_report(conn), ",".join("?" * len(severities))), severities)
        if isinstance(r[0], str)]


def main_growth(conn: sqlite3.Connection, last_step: int, start: int | None = None,
                points: int = 128, tail: int = 256) -> dict[str, float | None]:
    """The main process' RSS peak and USS slope (bytes/step, least squares, after ``start``;
    default the second half, the first being warm-up), from steps looked up by key: at most
    ``points`` evenly spaced ones over the whole run and as many after ``start``, and every
    one of the last ``tail`` steps (where a killed run's peak is). A full pass over a long
    trace costs ten times more; the peak is then the highest of the steps looked at."""
    start = last_step // 2 if start is None else start
    wanted = _spaced(0, last_step, points) | _spaced(start, last_step, points)
    found = conn.execute("SELECT step, rss, uss FROM steps WHERE step IN (%s)"
                         % ",".join("?" * len(wanted)), sorted(wanted)).fetchall() \
        if wanted else []
    found += conn.execute("SELECT step, rss, uss FROM steps WHERE step > ?",
                          (max(last_step - tail, 0),)).fetchall()
    peak = max((r[1] for r in found if _num(r[1]) is not None), default=None)
    fit = [(step, uss) for step, _rss, uss in found if isinstance(step, int) and step > start]
    return {"main_rss_peak": _num(peak), "main_uss_slope": _slope(fit)}


def _spaced(start: int, last: int, points: int) -> set[int]:
    span = max(0, last - start)
    return {start + 1 + (i * span) // points for i in range(min(points, span))}


def _slope(found: list[tuple[Any, Any]]) -> float | None:
    pairs = [(float(x), float(y)) for x, y in found if _num(x) is not None and _num(y) is not None]
    if len(pairs) < 3:
        return None
    mx = sum(x for x, _ in pairs) / len(pairs)
    my = sum(y for _, y in pairs) / len(pairs)
    sxx = sum((x - mx) ** 2 for x, _ in pairs)
    return sum((x - mx) * (y - my) for x, y in pairs) / sxx if sxx > 0 else None


def main_uss_points(conn: sqlite3.Connection, points: int = 400) -> tuple[list[float],
                                                                         list[float]]:
    """The main process' USS at ``points`` evenly spaced steps (looked up by key) and the
    last one: a line to draw beside the other ranks', not a series to judge."""
    last = conn.execute("SELECT MAX(step) FROM steps").fetchone()[0] or 0
    wanted = sorted(_spaced(0, int(last), points) | {int(last)})
    found = conn.execute("SELECT step, uss FROM steps WHERE uss IS NOT NULL AND step IN (%s) "
                         "ORDER BY step" % ",".join("?" * len(wanted)), wanted).fetchall()
    return [float(s) for s, _ in found], [float(u) for _, u in found]


def _num(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) \
        else None
