"""The trace: one SQLite file per run (per rank), its schema and its version.

Units: bytes and seconds in tables (exact, integer where possible); mebibytes (MiB) in
the ``torch_trace`` view, because that is what people type SQL against.

Every table is append-only during a run except ``judgements`` (the live detector replaces
its own row) and ``meta`` (key/value JSON). The tables are declared in ``tables``;
``docs/trace-schema.md`` is generated from them.
"""

from __future__ import annotations

from torchleak.trace.tables import TABLES, VIEWS

SCHEMA_VERSION = 3  # 3: the judgements table (meta 'report'/'live' before)
# holders.graph_nodes stops counting here: a value at the cap means "at least".
GRAPH_NODES_CAP = 5_000
TRACE_FILENAME = "trace.sqlite"
# Held (flock) by the writer while it writes: a reader that can take it knows nobody does.
LOCK_FILENAME = "trace.lock"

# One row per step in MiB, for hand-written SQL (also reachable as python.torch_trace).
# allocated: CUDA allocated MiB of device 0 (the latest sample at or before the step: a
# fast loop's counters are read every few steps) once CUDA is recorded, else USS MiB.
# rss, uss: the latest reading at or before the step (a fast loop's memory is read at most
# once a millisecond, less often while it stays the same: steps between readings have none
# in ``steps``).
# workers_uss: the latest sample of each worker at or before the step, summed.
TORCH_TRACE_VIEW = """
CREATE VIEW IF NOT EXISTS torch_trace AS
SELECT
    s.step                                     AS step,
    s.epoch                                    AS epoch,
    s.phase                                    AS phase,
    s.t                                        AS time,
    s.duration_ms                              AS duration_ms,
    COALESCE(c.allocated, m.uss) / 1048576.0   AS allocated,
    COALESCE(c.reserved, m.uss) / 1048576.0    AS reserved,
    m.rss / 1048576.0                          AS rss,
    m.uss / 1048576.0                          AS uss,
    c.peak_allocated / 1048576.0               AS peak_allocated,
    (SELECT SUM(w.uss) FROM (
        SELECT p.uss AS uss, MAX(p.t) FROM process_samples p
         WHERE p.role = 'worker' AND p.step = (
           SELECT MAX(q.step) FROM process_samples q
            WHERE q.role = 'worker' AND q.step <= s.step)
         GROUP BY p.pid) w) / 1048576.0 AS workers_uss
FROM steps s
LEFT JOIN steps m ON m.step = (
    SELECT r.step FROM steps r WHERE r.step <= s.step AND r.uss IS NOT NULL
     ORDER BY r.step DESC LIMIT 1)
LEFT JOIN cuda_samples c ON c.device = 0 AND c.step = (
    SELECT MAX(x.step) FROM cuda_samples x WHERE x.device = 0 AND x.step <= s.step);
"""

ALL_DDL = "\n".join(t.ddl() for t in (*TABLES, *VIEWS)) + "\n" + TORCH_TRACE_VIEW
