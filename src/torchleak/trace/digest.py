"""A trace read in a few aggregate queries: what the cross-rank view needs of one rank.

A job of a thousand ranks cannot afford to parse every rank's stored report or stream
every rank's rows into Python. These queries let SQLite do the work in C, one pass each:
the small metadata keys (never the big stored report), a few fields of the stored report
(``json_extract``), and the main process' memory over the steps summed for a straight-line
fit (``main_growth``).
"""

from __future__ import annotations

import sqlite3
from typing import Any

from torchleak.trace.reader import parse_json

BIG_META = ("report",)  # keys whose values are whole reports: read in parts, never whole
_MIB = 1048576.0


def small_meta(conn: sqlite3.Connection) -> dict[str, Any]:
    """Every meta key except the stored report (and anything too large to be ours)."""
    rows = conn.execute("SELECT key, value FROM meta WHERE key NOT IN (%s) AND length(value) "
                        "< 100000" % ",".join("?" * len(BIG_META)), BIG_META).fetchall()
    return {k: parse_json(v) for k, v in rows if isinstance(k, str) and v is not None}


def report_parts(conn: sqlite3.Connection) -> dict[str, Any] | None:
    """The stored report's verdict, steps, reason, main USS slope and RSS peak; None when
    the run stored no report."""
    row = conn.execute(
        "SELECT json_extract(value, '$.verdict'), json_extract(value, '$.steps'), "
        "json_extract(value, '$.reason'), "
        "(SELECT json_extract(s.value, '$.slope_per_step') FROM json_each(meta.value, "
        "'$.signals') AS s WHERE json_extract(s.value, '$.name') = 'main_uss'), "
        "(SELECT json_extract(s.value, '$.peak_value') FROM json_each(meta.value, "
        "'$.signals') AS s WHERE json_extract(s.value, '$.name') = 'main_rss') "
        "FROM meta WHERE key = 'report' AND json_valid(value)").fetchone()
    if row is None or row[0] is None:
        return None
    verdict, steps, reason, slope, peak = row
    return {"verdict": str(verdict), "steps": steps if isinstance(steps, int) else 0,
            "reason": str(reason or ""), "main_uss_slope": _num(slope), "main_rss_peak": _num(peak)}


def main_growth(conn: sqlite3.Connection, last_step: int,
                start: int | None = None) -> dict[str, float | None]:
    """One pass over the steps: the RSS peak and the least-squares slope (bytes/step) of the
    main process' USS after ``start`` (default: the second half; the first is warm-up)."""
    start = last_step // 2 if start is None else start
    mid = (start + last_step) / 2.0  # centred steps keep the sums exact enough in doubles
    row = conn.execute(
        "SELECT MAX(rss), COUNT(uss) FILTER (WHERE step > :s), "
        "TOTAL(step - :m) FILTER (WHERE step > :s AND uss IS NOT NULL), "
        "TOTAL(uss / :u) FILTER (WHERE step > :s), "
        "TOTAL((step - :m) * (uss / :u)) FILTER (WHERE step > :s), "
        "TOTAL((step - :m) * (step - :m)) FILTER (WHERE step > :s AND uss IS NOT NULL) "
        "FROM steps", {"s": start, "m": mid, "u": _MIB}).fetchone()
    peak, n, sx, sy, sxy, sxx = row
    slope = None
    if n and n >= 3 and (n * sxx - sx * sx) > 0:
        slope = (n * sxy - sx * sy) / (n * sxx - sx * sx) * _MIB
    return {"main_rss_peak": _num(peak), "main_uss_slope": slope}


def main_uss_points(conn: sqlite3.Connection, points: int = 400) -> tuple[list[float],
                                                                         list[float]]:
    """The main process' USS at most ``points`` points: the trough of each bucket of steps."""
    last = conn.execute("SELECT MAX(step) FROM steps").fetchone()[0] or 0
    bucket = max(1, -(-int(last) // points))
    found = conn.execute("SELECT MIN(step), MIN(uss) FROM steps WHERE uss IS NOT NULL "
                         "GROUP BY step / ? ORDER BY 1", (bucket,)).fetchall()
    return [float(s) for s, _ in found], [float(u) for _, u in found]


def _num(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) \
        else None
