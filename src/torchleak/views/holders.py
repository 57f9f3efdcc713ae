"""Who holds the memory: holder growth between the first and last sample, and its chart."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

from torchleak.views.series import Chart, Line

_GROWTH_SQL = """
WITH ends AS (
  SELECT holder, MIN(step) AS first_step, MAX(step) AS last_step, COUNT(*) AS samples
  FROM holders GROUP BY holder
)
SELECT e.holder, f.kind, f.type_name, e.first_step, e.last_step, e.samples,
       f.length, l.length, f.bytes, l.bytes
FROM ends e
JOIN holders f ON f.holder = e.holder AND f.step = e.first_step
JOIN holders l ON l.holder = e.holder AND l.step = e.last_step
GROUP BY e.holder
"""


@dataclass
class HolderGrowth:
    holder: str
    kind: str
    type_name: str
    first_step: int
    last_step: int
    samples: int
    first_length: int | None
    last_length: int | None
    first_bytes: int | None
    last_bytes: int | None

    @property
    def bytes_growth(self) -> int:
        return (self.last_bytes or 0) - (self.first_bytes or 0)

    @property
    def length_growth(self) -> int:
        return (self.last_length or 0) - (self.first_length or 0)


def load_holder_growth(conn: sqlite3.Connection, limit: int = 8) -> list[HolderGrowth]:
    """The holders that grew most between their first and last sample (growth only)."""
    try:
        rows = conn.execute(_GROWTH_SQL).fetchall()
    except sqlite3.DatabaseError:
        return []
    found = [HolderGrowth(r[0], r[1], r[2] or "", int(r[3]), int(r[4]), int(r[5]),
                          r[6], r[7], r[8], r[9]) for r in rows]
    growing = [h for h in found if h.samples > 1 and (h.bytes_growth > 0 or h.length_growth > 0)]
    growing.sort(key=lambda h: (h.bytes_growth, h.length_growth), reverse=True)
    return growing[:limit]


def holder_chart(conn: sqlite3.Connection, holder: str) -> Chart | None:
    """Retained bytes of one holder over steps (its length when bytes are unknown)."""
    try:
        rows = conn.execute("SELECT step, bytes, length FROM holders WHERE holder = ? ORDER BY step",
                            (holder,)).fetchall()
    except sqlite3.DatabaseError:
        return None
    if len(rows) < 2:
        return None
    steps = [int(r[0]) for r in rows]
    if any(r[1] for r in rows):
        line = Line(f"holder:{holder}", "retained bytes", steps, [float(r[1] or 0) for r in rows])
        return Chart(f"holder-{holder}", f"Held by {holder}", "bytes", [line],
                     note="Estimated bytes retained through this holder, at each holder walk.")
    line = Line(f"holder:{holder}:length", "length", steps, [float(r[2] or 0) for r in rows])
    return Chart(f"holder-{holder}", f"Held by {holder}", "count", [line],
                 note="Length of this holder at each holder walk.")
