"""Every trace table, declared once: its columns, their SQL types and what they mean.

The DDL (``schema.ALL_DDL``), the writer's INSERTs, the readers' SELECTs and named rows,
and ``docs/trace-schema.md`` all come from the declarations below. A new probe's table is
one ``Table(...)`` added to ``TABLES``.

Units: bytes and seconds, integers where exact.
"""

from __future__ import annotations

from collections import namedtuple
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Column:
    name: str
    sql: str  # the SQL type and constraints, e.g. "INTEGER NOT NULL"
    doc: str = ""


@dataclass(frozen=True)
class Table:
    name: str
    per: str  # what one row is, e.g. "training step"
    doc: str
    columns: tuple[Column, ...]
    constraints: tuple[str, ...] = ()  # e.g. "PRIMARY KEY (step, device)"
    indexes: tuple[tuple[str, tuple[str, ...]], ...] = ()  # (index name, its columns)
    # Rows appended by the recorder through the buffered writer (meta and judgements are
    # written their own way).
    appended: bool = True
    row: Any = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        title = "".join(part.title() for part in self.name.split("_"))
        object.__setattr__(self, "row", namedtuple(f"{title}Row", self.names))

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)

    def ddl(self) -> str:
        lines = [f"    {c.name} {c.sql}" for c in self.columns]
        lines += [f"    {c}" for c in self.constraints]
        ddl = f"CREATE TABLE IF NOT EXISTS {self.name} (\n" + ",\n".join(lines) + "\n);"
        for index, columns in self.indexes:
            ddl += f"\nCREATE INDEX IF NOT EXISTS {index} ON {self.name}({', '.join(columns)});"
        return ddl

    def insert(self) -> str:
        return (f"INSERT OR REPLACE INTO {self.name} ({', '.join(self.names)}) "
                f"VALUES ({', '.join('?' * len(self.columns))})")


@dataclass(frozen=True)
class View:
    """A view for hand-written SQL over the tables (declared like them, documented with
    them)."""

    name: str
    per: str
    doc: str
    columns: tuple[Column, ...]
    select: str  # the SELECT the view runs

    def ddl(self) -> str:
        return f"CREATE VIEW IF NOT EXISTS {self.name} AS\n{self.select.strip()};"


def _step(doc: str = "the latest step when it was taken") -> Column:
    return Column("step", "INTEGER NOT NULL", doc)


_T = Column("t", "REAL NOT NULL", "unix time")

META = Table("meta", "key", "The run's metadata, as JSON values (keys below).", (
    Column("key", "TEXT PRIMARY KEY"),
    Column("value", "TEXT NOT NULL", "JSON"),
), appended=False)

STEPS = Table("steps", "training step", "One row at each step boundary (docs/detection.md "
              "says what one step is).", (
    Column("step", "INTEGER PRIMARY KEY", "1-based training step"),
    Column("t", "REAL NOT NULL", "unix time at the step boundary (the monotonic clock's, "
                                 "set to the wall clock at every memory reading)"),
    Column("duration_ms", "REAL", "wall time since the previous boundary, torchleak's own "
                                  "time excluded"),
    Column("epoch", "INTEGER", "the last `epoch` mark, NULL if none"),
    Column("phase", "TEXT", "`train`, or the phase a mark opened"),
    Column("rss", "INTEGER", "main process resident bytes; NULL between readings (at most "
                             "one a millisecond while memory moves, up to 8 ms apart while "
                             "it stays the same, and at every step that runs a probe)"),
    Column("uss", "INTEGER", "main process private bytes (resident - shared; see below); "
                             "NULL where `rss` is"),
    Column("gc_count0", "INTEGER", "`gc.get_count()[0]`, read with `rss` (NULL between)"),
    Column("monitor_ms", "REAL", "torchleak's own time at this boundary (a full collection of "
                                "the program's heap that ran inside one of its probes excepted)"),
))

PROCESS_SAMPLES = Table("process_samples", "process sample", "Exact values from "
                        "`/proc/<pid>/smaps_rollup`, read off the training thread.", (
    _step(), _T,
    Column("pid", "INTEGER NOT NULL"),
    Column("role", "TEXT NOT NULL", "`main` or `worker` (a fork or multiprocessing child)"),
    Column("rss", "INTEGER"),
    Column("uss", "INTEGER", "Private_* of smaps_rollup (exact USS)"),
    Column("pss", "INTEGER"),
), indexes=(("process_samples_step", ("role", "step")),))

HEAP_SAMPLES = Table("heap_samples", "heap sample", "Every 1-2 s, and at every full holder "
                     "walk.", (
    _step(), _T,
    Column("py_blocks", "INTEGER", "`sys.getallocatedblocks()`: Python objects alive"),
    Column("malloc_in_use", "INTEGER", "C allocator: bytes handed out (glibc `mallinfo2`; "
                                       "NULL elsewhere)"),
    Column("malloc_free", "INTEGER", "C allocator: freed bytes it keeps in its heaps"),
    Column("malloc_mmapped", "INTEGER", "C allocator: bytes in its own mmap()ed blocks"),
))

CUDA_SAMPLES = Table("cuda_samples", "sampled step x device", "Only once the script "
                     "itself initialised CUDA, and only for the devices it uses. Every step "
                     "of a slow loop; a fast loop's every few steps (a read is followed by "
                     "200 times its own time without one, at most 50 ms), and every step "
                     "that runs a probe. The allocator's counters at each; the driver's "
                     "`free` and `total` (and the device list) at most once a second, NULL "
                     "between.", (
    Column("step", "INTEGER NOT NULL"),
    Column("device", "INTEGER NOT NULL"),
    Column("allocated", "INTEGER"),
    Column("reserved", "INTEGER"),
    Column("active", "INTEGER"),
    Column("inactive_split", "INTEGER"),
    Column("peak_allocated", "INTEGER"),
    Column("peak_reserved", "INTEGER"),
    Column("num_alloc_retries", "INTEGER"),
    Column("num_ooms", "INTEGER"),
    Column("free", "INTEGER", "`cudaMemGetInfo` free (NULL between full samples)"),
    Column("total", "INTEGER", "`cudaMemGetInfo` total (NULL between full samples)"),
), constraints=("PRIMARY KEY (step, device)",))

CENSUS = Table("census", "census step", "Every live tensor found through gc, at "
               "log-spaced and scheduled steps.", (
    Column("step", "INTEGER PRIMARY KEY"),
    _T,
    Column("duration_ms", "REAL", "the cost of this census"),
    Column("reason", "TEXT", "`anchor`, `schedule`, `hunt` (growth no holder explains), "
                             "`guard`, `signal`, or `attach` for `attach --snapshot`"),
    Column("tensors", "INTEGER", "live tensors"),
    Column("tensor_bytes", "INTEGER", "their storages, each counted once"),
    Column("grad_fn_tensors", "INTEGER", "tensors holding a `grad_fn`"),
    Column("graph_nodes", "INTEGER", "autograd nodes reachable from live tensors"),
    Column("graph_bytes", "INTEGER", "every storage the live autograd graphs saved for "
                                     "backward, counted once, parameters excepted"),
    Column("gc_objects", "INTEGER"),
))

CENSUS_TENSORS = Table("census_tensors", "census step x device x dtype", "", (
    Column("step", "INTEGER NOT NULL"),
    Column("device", "TEXT NOT NULL"),
    Column("dtype", "TEXT NOT NULL"),
    Column("count", "INTEGER NOT NULL"),
    Column("bytes", "INTEGER NOT NULL"),
))

CENSUS_TYPES = Table("census_types", "census step x type", "The 40 most common gc-tracked "
                     "types.", (
    Column("step", "INTEGER NOT NULL"),
    Column("type_name", "TEXT NOT NULL", "module.qualname"),
    Column("count", "INTEGER NOT NULL"),
))

HOLDERS = Table("holders", "holder walk step x holder", "What holds memory, by name. A "
                "holder absent from a full walk was empty or did not exist.", (
    Column("step", "INTEGER NOT NULL"),
    Column("holder", "TEXT NOT NULL", "a stable path from a user-visible root, e.g. "
                                      "`Trainer.train_outputs`, `main().running_loss`, "
                                      "`lru_cache build_mask()`"),
    Column("kind", "TEXT NOT NULL", "`container`, `tensor` (numpy arrays too), `hooks`, "
                                    "`cache`, `figures`, `dataloader`, `switch`"),
    Column("type_name", "TEXT"),
    Column("length", "INTEGER", "len() / hook count / cache size / node count"),
    Column("bytes", "INTEGER", "estimated retained bytes (from a sample of 8 items)"),
    Column("tensors", "INTEGER"),
    Column("tensor_bytes", "INTEGER"),
    Column("grad_fn_tensors", "INTEGER"),
    Column("graph_nodes", "INTEGER"),
    Column("detail", "TEXT", "JSON: `maxlen`, `item_type`, hook names, the route the holder "
                             "is found by, dataset attributes, ..."),
), indexes=(("holders_holder", ("holder", "step")),))

HOLDER_WALKS = Table("holder_walks", "holder walk", "", (
    Column("step", "INTEGER NOT NULL"),
    Column("kind", "TEXT NOT NULL", "`full` (from every root) or `quick` (suspects only)"),
    Column("reason", "TEXT", "`anchor`, `schedule`, `phase`, `end`, `hunt` (growth no "
                             "holder explains), `confirm` (suspects re-measured), `request` "
                             "(`attach --walk`), `attach` (`attach --snapshot`)"),
    Column("duration_ms", "REAL"),
    Column("holders", "INTEGER", "rows written"),
))

MARKS = Table("marks", "mark", "", (
    Column("step", "INTEGER NOT NULL", "the step the mark falls after (0: before step 1)"),
    _T,
    Column("name", "TEXT NOT NULL", "`epoch`, `loader_epoch`, `validation_start`, "
                                    "`validation_end`, or yours via `torchleak.mark`"),
    Column("value", "TEXT"),
))

EVENTS = Table("events", "event", "", (
    _T,
    Column("step", "INTEGER"),
    Column("kind", "TEXT NOT NULL", "`probe_disabled`, `detection`, `guard`, `cuda_snapshot`, "
                                    "`request_failed`, `callback_failed`, `analysis_failed`, "
                                    "`step_source`, `attach` (every `torchleak attach` "
                                    "command and its result)"),
    Column("source", "TEXT"),
    Column("message", "TEXT"),
))

BREAKDOWN = Table("breakdown", "census step x category", "Where the measured memory goes at "
                  "that census, and the totals it splits (docs/detection.md).", (
    Column("step", "INTEGER NOT NULL", "the census step the split was measured at"),
    Column("category", "TEXT NOT NULL", "`parameters`, `gradients`, `optimizer_state`, "
                                        "`autograd_saved`, `other_tensors`, `python_objects`, "
                                        "`allocator_slack`, `workers`, on CUDA "
                                        "`cuda_parameters` ... `cuda_cache`, `cuda_other`; "
                                        "`total` (main USS + workers' USS), `cuda_total`"),
    Column("bytes", "INTEGER NOT NULL"),
))

OPEN_FILES = Table("open_files", "open files sample", "The process's open file descriptors and "
                   "threads (`/proc/self/fd`, `/proc/self/task`): handles that pile up end in "
                   "\"Too many open files\" before memory runs out.", (
    _step(), _T,
    Column("fds", "INTEGER", "open file descriptors (sockets and shared memory included)"),
    Column("threads", "INTEGER", "the process's threads"),
))

JUDGEMENTS = Table("judgements", "judgement", "The run's judgements, one per phase: the live "
                   "detector's latest (phase `live`, replaced at each pass) and the end-of-run "
                   "report (phase `final`). Read them with the `findings` view.", (
    Column("phase", "TEXT PRIMARY KEY", "`live` or `final`"),
    Column("step", "INTEGER", "the last step the analysis saw"),
    Column("t", "REAL", "unix time of the judgement"),
    Column("verdict", "TEXT", "`leak`, `no_leak`, `inconclusive` (live: `leak` only with a "
                              "called finding)"),
    Column("reason", "TEXT", "the verdict's reason"),
    Column("tier", "TEXT", "live: `none`, `suspected` or `called`; NULL for `final`"),
    Column("calls", "TEXT", "live: JSON list of the leaks called so far (`step`, `culprit`, "
                            "`key`, `why`, `detected_at_step`, `target`: the holder path or "
                            "signal); NULL for `final`"),
    Column("suspects", "INTEGER", "live: serious findings suspected so far"),
    Column("report", "TEXT", "the whole Report as JSON (as `report --format json` prints "
                             "it; live: the findings suspects included, with `called` null)"),
), appended=False)


FINDINGS = View("findings", "finding of a judgement", "Each judgement's findings, one row "
                "each, from `judgements.report`.", (
    Column("phase", "TEXT", "`live` or `final`"),
    Column("step", "INTEGER", "the last step the analysis saw"),
    Column("id", "INTEGER", "the finding's place in its report, most serious first"),
    Column("kind", "TEXT"),
    Column("culprit", "TEXT"),
    Column("severity", "TEXT"),
    Column("bytes_per_step", "REAL"),
    Column("detected_at_step", "INTEGER"),
    Column("json", "TEXT", "the whole finding, as in the report JSON"),
), """
SELECT j.phase AS phase, j.step AS step, CAST(f.key AS INTEGER) AS id,
       json_extract(f.value, '$.kind') AS kind, json_extract(f.value, '$.culprit') AS culprit,
       json_extract(f.value, '$.severity') AS severity,
       json_extract(f.value, '$.bytes_per_step') AS bytes_per_step,
       json_extract(f.value, '$.detected_at_step') AS detected_at_step, f.value AS json
  FROM judgements AS j, json_each(j.report, '$.findings') AS f
 WHERE json_valid(j.report)
""")

TABLES: tuple[Table, ...] = (META, STEPS, PROCESS_SAMPLES, HEAP_SAMPLES, CUDA_SAMPLES, CENSUS,
                             CENSUS_TENSORS, CENSUS_TYPES, HOLDERS, HOLDER_WALKS, MARKS,
                             EVENTS, BREAKDOWN, OPEN_FILES, JUDGEMENTS)
VIEWS: tuple[View, ...] = (FINDINGS,)
BY_NAME: dict[str, Table] = {t.name: t for t in TABLES}
APPENDED: tuple[Table, ...] = tuple(t for t in TABLES if t.appended)

# The keys of ``meta`` (JSON values), for the schema documentation.
META_KEYS: dict[str, str] = {
    "schema_version": "bumped on any incompatible change; a reader refuses a newer one",
    "torchleak_version": "the recorder's version", "name": "the run's name",
    "script": "the script or module run", "argv": "its arguments", "cwd": "its folder",
    "pid": "the recorded process", "hostname": "where it ran", "python": "its version",
    "torch": "torch's version and build", "platform": "the OS",
    "devices": "the CUDA devices torch sees", "gpu_totals": "each used device's memory",
    "ram_total": "the machine's memory", "swap_total": "the machine's swap",
    "cgroup_limit": "the memory limit of the run's cgroup, if any",
    "limit": "`--limit`: `{bytes, name}`",
    "guard_settings": "the guard's limit and margin", "guard": "what the guard did, when it fired",
    "safe": "settings `--safe` applied",
    "safe_trims": "what `--safe`'s trimmer gave back to the system", "rank": "this process's rank (torchrun)",
    "world_size": "the job's ranks",
    "alloc_conf": "`PYTORCH_CUDA_ALLOC_CONF`",
    "budget_pct": "torchleak's share of the run it may spend (`--budget`)",
    "start_time": "unix time", "end_time": "unix time",
    "status": "`running`/`finished`/`crashed`/`stopped`; a `running` trace whose writer is "
              "gone reads as `killed`",
    "exit_code": "the script's", "steps": "steps recorded", "step_definition": "what one step was in this run",
    "monitor_seconds": "torchleak's own time on the training thread",
    "process_seconds": "the wall time the probes' budget counts against, at the end of the "
                       "recording: the process's under `torchleak run` (start-up included), "
                       "the monitor's in-process",
    "probe_costs": "each probe's runs and seconds",
    "phase_walks": "the walks at epoch and validation ends: `runs`, `seconds`, and the ends "
                   "`skipped` (past the first 4, while their walks would pass one budget of "
                   "the wall time so far)",
    "anchor_probe_seconds": "the probes' fixed cost outside the budget: anchors (start-up "
                            "censuses and holder walks) and the walks the run's events ask "
                            "for (epoch ends, hunts, the end)",
    "live_detector": "the live detector's passes: `seconds` of CPU, `passes`, "
                     "`deciding_seconds` and `deciding_passes` (those re-checking suspects, "
                     "outside the cap) and "
                     "the `share` of the run's wall time the others may take, and that "
                     "`wall_seconds` the share counts against (as `process_seconds`)",
    "probes_disabled": "probes switched off after a failure",
    "own_memory": "`start_bytes`: USS the recorder added by starting; `census_scan_bytes`: "
                  "the census scan's transient list",
    "writer_dropped": "rows dropped while the disk or database refused them",
    "control": "the `attach` socket: `mode` `full`/`observe`/`off`, `socket`, `protocol`, "
               "`pid`, or the `reason` none is served (docs/attach.md)",
    "cuda_snapshot": "the allocator history's file",
}


def as_markdown() -> str:
    """The tables' part of ``docs/trace-schema.md``."""
    out: list[str] = []
    for table in (*TABLES, *VIEWS):
        label = "view " if isinstance(table, View) else ""
        out.append(f"### {label}`{table.name}`: one row per {table.per}\n")
        if table.doc:
            out.append(f"{table.doc}\n")
        out.append("| column | type | meaning |\n|---|---|---|")
        out += [f"| `{c.name}` | {c.sql} | {c.doc} |" for c in table.columns]
        if table is META:
            out.append("\nKeys:\n")
            out += [f"- `{key}`" + (f": {doc}" if doc else "") for key, doc in META_KEYS.items()]
        out.append("")
    return "\n".join(out)


GENERATED_START = "<!-- generated from src/torchleak/trace/tables.py"
GENERATED_END = "<!-- end of the generated part -->"


def documented(text: str) -> str:
    """``text`` (the schema document) with its generated part made from the declarations."""
    start = text.index(GENERATED_START)
    start = text.index("\n", start) + 1
    end = text.index(GENERATED_END)
    return text[:start] + "\n" + as_markdown() + "\n" + text[end:]


if __name__ == "__main__":  # python -m torchleak.trace.tables --write docs/trace-schema.md
    import sys
    from pathlib import Path

    if len(sys.argv) == 3 and sys.argv[1] == "--write":
        path = Path(sys.argv[2])
        path.write_text(documented(path.read_text()))
    else:
        print(as_markdown())
