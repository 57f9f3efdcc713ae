"""The trace: one SQLite file per run (per rank), its schema and its version.

Units: bytes and seconds in tables (exact, integer where possible); mebibytes (MiB) in
the ``torch_trace`` view, because that is what people type SQL against.

Every table is append-only during a run except ``findings`` (the live detector replaces
its own rows) and ``meta`` (key/value JSON). See ``docs/trace-schema.md`` for the
column-by-column description.
"""

from __future__ import annotations

SCHEMA_VERSION = 2
# holders.graph_nodes stops counting here: a value at the cap means "at least".
GRAPH_NODES_CAP = 5_000
TRACE_FILENAME = "trace.sqlite"
# Held (flock) by the writer while it writes: a reader that can take it knows nobody does.
LOCK_FILENAME = "trace.lock"

TABLES = """
CREATE TABLE IF NOT EXISTS meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL                -- JSON
);
CREATE TABLE IF NOT EXISTS steps (
    step        INTEGER PRIMARY KEY,   -- 1-based training step (see docs: what one step is)
    t           REAL NOT NULL,         -- unix time at the step boundary
    duration_ms REAL,                  -- wall time since the previous boundary
    epoch       INTEGER,               -- last 'epoch' mark, NULL if none
    phase       TEXT,                  -- 'train', or the phase a mark opened
    rss         INTEGER,               -- main process resident bytes
    uss         INTEGER,               -- main process private bytes (resident - shared)
    py_blocks   INTEGER,               -- sys.getallocatedblocks(), when sampled
    gc_count0   INTEGER,               -- gc.get_count()[0]
    monitor_ms  REAL                   -- torchleak's own time at this boundary
);
CREATE TABLE IF NOT EXISTS process_samples (
    step  INTEGER NOT NULL,            -- latest step when the sample was taken
    t     REAL NOT NULL,
    pid   INTEGER NOT NULL,
    role  TEXT NOT NULL,               -- 'main' | 'worker' (a fork or multiprocessing child)
    rss   INTEGER,
    uss   INTEGER,                     -- smaps_rollup Private_* (exact USS)
    pss   INTEGER
);
CREATE INDEX IF NOT EXISTS process_samples_step ON process_samples(role, step);
CREATE TABLE IF NOT EXISTS heap_samples (
    step           INTEGER NOT NULL,   -- latest step when the sample was taken
    t              REAL NOT NULL,
    py_blocks      INTEGER,            -- sys.getallocatedblocks(): Python objects alive
    malloc_in_use  INTEGER,            -- C allocator: bytes handed out (glibc mallinfo2)
    malloc_free    INTEGER,            -- C allocator: freed bytes it keeps in its heaps
    malloc_mmapped INTEGER             -- C allocator: bytes in its own mmap()ed blocks
);
CREATE TABLE IF NOT EXISTS cuda_samples (
    step              INTEGER NOT NULL,
    device            INTEGER NOT NULL,
    allocated         INTEGER,
    reserved          INTEGER,
    active            INTEGER,
    inactive_split    INTEGER,
    peak_allocated    INTEGER,
    peak_reserved     INTEGER,
    num_alloc_retries INTEGER,
    num_ooms          INTEGER,
    free              INTEGER,         -- cudaMemGetInfo free
    total             INTEGER,         -- cudaMemGetInfo total
    PRIMARY KEY (step, device)
);
CREATE TABLE IF NOT EXISTS census (
    step            INTEGER PRIMARY KEY,
    t               REAL NOT NULL,
    duration_ms     REAL,              -- cost of this census
    reason          TEXT,              -- 'anchor' | 'schedule' | 'signal'
    tensors         INTEGER,           -- live tensors found through gc
    tensor_bytes    INTEGER,           -- their storages, each counted once
    grad_fn_tensors INTEGER,           -- tensors holding a grad_fn
    graph_nodes     INTEGER,           -- autograd nodes reachable from live tensors
    graph_bytes     INTEGER,           -- storages those graphs saved (parameters excepted)
    gc_objects      INTEGER
);
CREATE TABLE IF NOT EXISTS census_tensors (
    step   INTEGER NOT NULL,
    device TEXT NOT NULL,
    dtype  TEXT NOT NULL,
    count  INTEGER NOT NULL,
    bytes  INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS census_types (
    step      INTEGER NOT NULL,
    type_name TEXT NOT NULL,           -- module.qualname
    count     INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS holders (
    step            INTEGER NOT NULL,
    holder          TEXT NOT NULL,     -- stable path from a user-visible root
    kind            TEXT NOT NULL,     -- container | tensor | hooks | cache | figures | dataset
    type_name       TEXT,
    length          INTEGER,           -- len() / hook count / cache size / node count
    bytes           INTEGER,           -- estimated retained bytes
    tensors         INTEGER,
    tensor_bytes    INTEGER,
    grad_fn_tensors INTEGER,
    graph_nodes     INTEGER,
    detail          TEXT               -- JSON: source hints (hook names, function, file:line)
);
CREATE INDEX IF NOT EXISTS holders_holder ON holders(holder, step);
CREATE TABLE IF NOT EXISTS holder_walks (
    step        INTEGER NOT NULL,
    kind        TEXT NOT NULL,         -- 'full' (walk from every root) | 'quick' (suspects only)
    reason      TEXT,                  -- 'anchor' | 'schedule' | 'phase' | 'end'
    duration_ms REAL,
    holders     INTEGER                -- rows written; a holder absent from a full walk was empty
);
CREATE TABLE IF NOT EXISTS marks (
    step  INTEGER NOT NULL,            -- the step the mark falls after (0 = before step 1)
    t     REAL NOT NULL,
    name  TEXT NOT NULL,               -- 'epoch' | 'validation_start' | 'validation_end' | user
    value TEXT
);
CREATE TABLE IF NOT EXISTS events (
    t       REAL NOT NULL,
    step    INTEGER,
    kind    TEXT NOT NULL,             -- 'probe_disabled' | 'detection' | 'warning' | ...
    source  TEXT,
    message TEXT
);
CREATE TABLE IF NOT EXISTS breakdown (
    step     INTEGER NOT NULL,         -- the census step the split was measured at
    category TEXT NOT NULL,            -- parameters | gradients | optimizer_state | ...
    bytes    INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS findings (
    id               INTEGER PRIMARY KEY,
    phase            TEXT NOT NULL DEFAULT 'final',  -- 'live' (online detector) | 'final'
    step             INTEGER,          -- the step the analysis saw last
    kind             TEXT NOT NULL,
    culprit          TEXT,
    severity         TEXT,
    bytes_per_step   REAL,
    detected_at_step INTEGER,
    json             TEXT NOT NULL     -- the whole finding, as in the report JSON
);
"""

# One row per step in MiB, for hand-written SQL (also reachable as python.torch_trace).
# allocated: CUDA allocated MiB of device 0 when recorded, else main-process USS MiB.
# workers_uss: the latest sample of each worker at or before the step, summed.
TORCH_TRACE_VIEW = """
CREATE VIEW IF NOT EXISTS torch_trace AS
SELECT
    s.step                                     AS step,
    s.epoch                                    AS epoch,
    s.phase                                    AS phase,
    s.t                                        AS time,
    s.duration_ms                              AS duration_ms,
    COALESCE(c.allocated, s.uss) / 1048576.0   AS allocated,
    COALESCE(c.reserved, s.uss) / 1048576.0    AS reserved,
    s.rss / 1048576.0                          AS rss,
    s.uss / 1048576.0                          AS uss,
    c.peak_allocated / 1048576.0               AS peak_allocated,
    (SELECT SUM(w.uss) FROM (
        SELECT p.uss AS uss, MAX(p.t) FROM process_samples p
         WHERE p.role = 'worker' AND p.step = (
           SELECT MAX(q.step) FROM process_samples q
            WHERE q.role = 'worker' AND q.step <= s.step)
         GROUP BY p.pid) w) / 1048576.0 AS workers_uss
FROM steps s
LEFT JOIN cuda_samples c ON c.step = s.step AND c.device = 0;
"""

ALL_DDL = TABLES + TORCH_TRACE_VIEW
