"""`torchleak query`: SQL written for probing's `python.torch_trace` view runs as is."""

from __future__ import annotations

import csv
import io
import json
import sqlite3
from pathlib import Path

import pytest

from torchleak.cli import main

SEED_PEAK = """
SELECT
    step,
    MAX(allocated) as peak_memory_mb
FROM python.torch_trace
GROUP BY step
ORDER BY step"""

SEED_GROWTH = """
WITH memory_trend AS (
  SELECT
    step,
    MAX(allocated) as peak,
    LAG(MAX(allocated)) OVER (ORDER BY step) as prev_peak
  FROM python.torch_trace
  GROUP BY step
)
SELECT
    step,
    peak,
    peak - prev_peak as growth
FROM memory_trend
WHERE peak > prev_peak
ORDER BY step;
"""

SEED_RECENT = """
-- 最近 100 步的内存趋势
SELECT
    step,
    AVG(allocated) as avg_memory,
    MAX(allocated) as peak_memory
FROM python.torch_trace
WHERE step > (SELECT MAX(step) - 100 FROM python.torch_trace)
GROUP BY step
ORDER BY step;
"""


def _json(capsys: pytest.CaptureFixture[str], run: Path, sql: str) -> list[dict[str, float]]:
    assert main(["query", str(run), sql, "--format", "json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_seed_queries_on_a_known_trace(leak_run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Synthetic CUDA allocated: 64 MiB + 64 KiB per step, so allocated = 64 + step/16 MiB.
    peak = _json(capsys, leak_run, SEED_PEAK)
    assert [r["step"] for r in peak] == list(range(1, 61))
    assert all(r["peak_memory_mb"] == pytest.approx(64 + r["step"] / 16) for r in peak)
    growth = _json(capsys, leak_run, SEED_GROWTH)
    assert [r["step"] for r in growth] == list(range(2, 61))
    assert all(r["growth"] == pytest.approx(1 / 16) for r in growth)
    recent = _json(capsys, leak_run, SEED_RECENT)
    assert len(recent) == 60 and recent[-1]["peak_memory"] == pytest.approx(64 + 60 / 16)


def test_table_and_csv_formats(leak_run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["query", str(leak_run), SEED_PEAK + " LIMIT 3"]) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[0].split("|")[0].strip() == "step" and table[-1] == "(3 rows)"
    assert main(["query", str(leak_run), "SELECT step, uss FROM steps LIMIT 2", "-f", "csv"]) == 0
    rows = list(csv.reader(io.StringIO(capsys.readouterr().out)))
    assert rows[0] == ["step", "uss"] and rows[1][0] == "1"


def test_plain_torch_trace_and_tables(leak_run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rows = _json(capsys, leak_run, "SELECT COUNT(*) AS n FROM torch_trace")
    assert rows == [{"n": 60}]
    rows = _json(capsys, leak_run, "SELECT name, COUNT(*) AS n FROM marks GROUP BY name ORDER BY name")
    assert {r["name"]: r["n"] for r in rows} == {"epoch": 3, "validation_end": 3, "validation_start": 3}


def test_sql_errors_are_one_clear_line(leak_run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["query", str(leak_run), "SELECT * FROM nope"]) == 65
    assert "no such table: nope" in capsys.readouterr().err
    assert main(["query", str(leak_run), "SELECT 1; SELECT 2"]) == 65
    assert "one statement" in capsys.readouterr().err
    assert main(["query", str(leak_run), "DROP TABLE steps"]) == 65
    assert "read-only" in capsys.readouterr().err


def test_seed_queries_on_a_recorded_run(recorded_run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    conn = sqlite3.connect(f"file:{recorded_run / 'trace.sqlite'}?mode=ro&immutable=1", uri=True)
    # Memory is read at most once a millisecond: a step without a reading shows the latest
    # one before it.
    latest, expected = None, []
    for step, uss in conn.execute("SELECT step, uss FROM steps ORDER BY step"):
        latest = uss if uss is not None else latest
        expected.append((step, latest / 1048576.0))
    conn.close()
    assert len(expected) == 60
    peak = _json(capsys, recorded_run, SEED_PEAK)
    assert [(r["step"], r["peak_memory_mb"]) for r in peak] == expected
    growth = _json(capsys, recorded_run, SEED_GROWTH)
    rising = [s for (s, v), (_, prev) in zip(expected[1:], expected) if v > prev]
    assert [r["step"] for r in growth] == rising
