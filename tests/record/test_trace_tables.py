"""The trace's tables are declared once (``torchleak.trace.tables``): a recorded trace has
exactly the declared columns, every meta key it writes is documented, and the schema
document's tables part is the one generated from the declarations."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from recordkit import record, write_script

from torchleak.record.probe import registered
from torchleak.trace import rows, tables

ROOT = Path(__file__).resolve().parents[2]

LOOP = """
import torch, torchleak
model = torch.nn.Linear(16, 4)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
kept = []
for step in range(120):
    loss = model(torch.randn(8, 16)).pow(2).mean()
    opt.zero_grad(); loss.backward(); opt.step()
    kept.append(torch.randn(64))
    if step == 60:
        torchleak.mark("epoch")
"""


def test_the_schema_document_is_generated_from_the_declarations() -> None:
    text = (ROOT / "docs" / "trace-schema.md").read_text()
    assert tables.documented(text) == text, (
        "docs/trace-schema.md is stale: python -m torchleak.trace.tables --write "
        "docs/trace-schema.md")
    for table in tables.TABLES:
        assert f"### `{table.name}`" in text


def test_a_recorded_trace_has_the_declared_tables_and_documented_meta(tmp_path: Path) -> None:
    # A budget of 20%: in a run of seconds the default 1% pays for no census.
    run = record(tmp_path, write_script(tmp_path, "loop.py", LOOP), options=("--budget", "20"))
    assert run.proc.returncode == 0, run.proc.stderr
    conn = run.connect()
    try:
        for table in tables.TABLES:
            columns = tuple(r[1] for r in conn.execute(f"PRAGMA table_info({table.name})"))
            assert columns == table.names, table.name
        keys = {r[0] for r in conn.execute("SELECT key FROM meta")}
        assert keys <= set(tables.META_KEYS), sorted(keys - set(tables.META_KEYS))
        steps = list(rows.read(conn, tables.STEPS))
        assert [r.step for r in steps] == list(range(1, len(steps) + 1))
        assert len(steps) >= 100
        # Memory is read at most once a millisecond: a step without a reading (NULL, never
        # a copied one) came within a millisecond of the last reading.
        read_at = None
        for r in steps:
            assert (r.rss is None) == (r.uss is None), r
            if r.uss is not None:
                assert r.uss > 0 and r.rss >= r.uss, r
                read_at = r.t
            else:
                assert read_at is not None and r.t - read_at < 0.0015, r
        marks = [m for _rowid, m in rows.read_new(conn, tables.MARKS)]
        assert ("epoch", 61) in [(m.name, m.step) for m in marks]
        holders = {r.holder for r in rows.read(conn, tables.HOLDERS)}
        assert any(h.endswith("kept") for h in holders), holders
        # Every registered probe ran, within its budget share, and wrote its tables.
        costs = run.meta("probe_costs")
        for probe in registered():
            assert costs[probe.name]["runs"] >= 1, (probe.name, costs)
            written = {t.name: conn.execute(f"SELECT COUNT(*) FROM {t.name}").fetchone()[0]
                       for t in probe.tables}
            assert any(written.values()), (probe.name, written)
        assert not run.meta("probes_disabled")
    finally:
        conn.close()


def test_a_column_an_older_trace_lacks_reads_none(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / "old.sqlite")
    conn.execute("CREATE TABLE steps (step INTEGER PRIMARY KEY, t REAL, rss INTEGER, "
                 "uss INTEGER)")
    conn.executemany("INSERT INTO steps VALUES (?, ?, ?, ?)", [(1, 1.0, 10, 5), (2, 2.0, 11, 6)])
    got = list(rows.read(conn, tables.STEPS, after=1))
    assert len(got) == 1 and got[0].step == 2 and got[0].uss == 6
    assert got[0].monitor_ms is None and got[0].duration_ms is None
    assert list(rows.read(conn, tables.CENSUS)) == []  # a table it lacks reads empty


def test_a_follower_asks_each_tables_columns_once(tmp_path: Path) -> None:
    # A live follower reads the same trace every few seconds: within ``columns_known`` a
    # table's columns are asked once; a table absent at first is asked again, so one
    # created later (an older writer's) is still read.
    conn = sqlite3.connect(tmp_path / "old.sqlite")
    conn.execute("CREATE TABLE steps (step INTEGER PRIMARY KEY, t REAL, rss INTEGER, "
                 "uss INTEGER)")
    conn.executemany("INSERT INTO steps VALUES (?, ?, ?, ?)", [(1, 1.0, 10, 5), (2, 2.0, 11, 6)])
    asked: list[str] = []
    conn.set_trace_callback(lambda sql: asked.append(sql) if "table_info" in sql else None)
    known: dict[str, list[str]] = {}
    for _ in range(3):
        with rows.columns_known(known):
            assert [r.uss for r in rows.read(conn, tables.STEPS)] == [5, 6]
            assert list(rows.read(conn, tables.MARKS)) == []
    assert sum("steps" in sql for sql in asked) == 1
    assert sum("marks" in sql for sql in asked) == 3
    conn.execute("CREATE TABLE marks (step INTEGER, t REAL, name TEXT, value TEXT)")
    conn.execute("INSERT INTO marks VALUES (2, 2.0, 'epoch', NULL)")
    with rows.columns_known(known):
        assert [m.name for m in rows.read(conn, tables.MARKS)] == ["epoch"]
    assert list(rows.read(conn, tables.STEPS))[0].monitor_ms is None  # outside: asked anew


def test_a_bound_appender_keeps_writing_across_flushes(tmp_path: Path) -> None:
    # The step boundary binds the steps table's append once: every flush must take rows
    # off that same buffer, and a row appended between flushes must reach the file.
    from torchleak.trace.writer import TraceWriter

    writer = TraceWriter(tmp_path / "trace.sqlite")
    add = writer.appender("steps")
    for step in range(1, 4):
        add((step, float(step), 1.0, None, "train", None, None, None, 0.01))
        writer.flush()
    writer.close()
    conn = sqlite3.connect(tmp_path / "trace.sqlite")
    try:
        assert [s for (s,) in conn.execute("SELECT step FROM steps ORDER BY step")] == [1, 2, 3]
    finally:
        conn.close()
