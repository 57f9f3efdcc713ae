"""Damaged traces, generated: every view answers with its output or one clear line and a
documented exit code (0, 65, 66), never an internal error, and ``ls`` keeps listing the
good runs beside the damaged one."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from torchleak.cli import main

from .synthetic import make_trace

ALLOWED = {0, 65, 66}
VIEWS = (["report"], ["report", "--format", "json"], ["report", "--format", "html"],
         ["top", "--once"], ["query", "SELECT COUNT(*) FROM steps"])


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_trace(tmp_path_factory.mktemp("pristine") / "run", steps=80)


def _check_views(run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for view in VIEWS:
        argv = [view[0], str(run), *view[1:]]
        code = main(argv)
        err = capsys.readouterr().err
        assert code in ALLOWED, (argv, code, err)
        assert "internal error" not in err and "Traceback" not in err, (argv, err)
        if code:
            assert err.startswith("torchleak: error: ") and err.count("\n") == 1, err
    code = main(["ls", "--runs-dir", str(run.parent)])
    out = capsys.readouterr().out
    assert code == 0 and "good" in out, out


def _copy(pristine: Path, tmp_path: Path) -> Path:
    run = tmp_path / "damaged"
    if run.exists():
        shutil.rmtree(run)
    shutil.copytree(pristine.parent, run)
    if not (tmp_path / "good").exists():
        shutil.copytree(pristine.parent, tmp_path / "good")
    return run


@settings(max_examples=20, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cut=st.floats(min_value=0.0, max_value=1.0),
       noise=st.lists(st.tuples(st.floats(0.0, 1.0), st.binary(min_size=1, max_size=64)),
                      max_size=6))
def test_truncated_or_scribbled_bytes(pristine: Path, tmp_path: Path, cut: float,
                                      noise: list[tuple[float, bytes]],
                                      capsys: pytest.CaptureFixture[str]) -> None:
    run = _copy(pristine, tmp_path)
    trace = run / "trace.sqlite"
    data = bytearray(trace.read_bytes())
    for where, junk in noise:
        at = int(where * (len(data) - 1))
        data[at:at + len(junk)] = junk
    trace.write_bytes(bytes(data[:max(0, int(cut * len(data)))] if cut < 1 else data))
    _check_views(run, capsys)


JSONISH = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True)
                       | st.text(max_size=20),
                       lambda inner: st.lists(inner, max_size=4)
                       | st.dictionaries(st.text(max_size=8), inner, max_size=4), max_leaves=12)


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(key=st.sampled_from(["report", "status", "start_time", "pid", "limit", "live", "guard",
                            "schema_version", "name", "cgroup_limit", "ram_total", "safe"]),
       value=JSONISH | st.text(max_size=30).map(lambda s: "RAW:" + s))
def test_wrong_types_in_metadata(pristine: Path, tmp_path: Path, key: str, value: object,
                                 capsys: pytest.CaptureFixture[str]) -> None:
    run = _copy(pristine, tmp_path)
    text = value[4:] if isinstance(value, str) and value.startswith("RAW:") else json.dumps(value)
    conn = sqlite3.connect(run / "trace.sqlite")
    conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (key, text))
    conn.commit()
    conn.close()
    _check_views(run, capsys)


@pytest.mark.parametrize("table", ["steps", "holders", "census", "process_samples", "marks",
                                   "events", "judgements"])
def test_wrong_types_in_rows(pristine: Path, tmp_path: Path, table: str,
                             capsys: pytest.CaptureFixture[str]) -> None:
    run = _copy(pristine, tmp_path)
    conn = sqlite3.connect(run / "trace.sqlite")
    columns = [r[1] for r in conn.execute(f"PRAGMA table_info({table})")]
    values = ["x" * 3, None, -1, 1e308, "{", b"\x00\xff"]
    for i in range(len(values)):
        row = [values[(i + j) % len(values)] for j in range(len(columns))]
        try:
            conn.execute(f"INSERT INTO {table} ({', '.join(columns)}) VALUES "
                         f"({', '.join('?' * len(columns))})", row)
        except sqlite3.IntegrityError:  # a typed key column refuses it: the next row
            continue
    conn.commit()
    conn.close()
    _check_views(run, capsys)


NOT_UTF8 = b"\x80caf\xc3"  # a continuation byte first, a lead byte cut off last


@pytest.mark.parametrize("where", ["meta key", "meta value", "steps", "holders", "marks",
                                   "table name", "view", "view syntax"])
def test_damaged_text_and_schema(pristine: Path, tmp_path: Path, where: str,
                               capsys: pytest.CaptureFixture[str]) -> None:
    # A scribbled byte inside a name leaves text SQLite stores but cannot be decoded, and
    # one inside the schema's SQL an error that quotes it: every view still answers (the
    # damaged characters shown as such) or says one line.
    run = _copy(pristine, tmp_path)
    trace = run / "trace.sqlite"
    if where in ("table name", "view", "view syntax"):  # bytes of the schema itself
        data = trace.read_bytes()
        name, damaged = {"table name": (b"tablemarksmarks", b"table\x80arksmarks"),
                         "view": (b"f.value AS json", b"f.val\x80e AS json"),
                         # SQLite's message quotes the SQL around it, newlines and all
                         "view syntax": (b"AS culprit,", b"AS c'lprit,")}[where]
        assert data.count(name) == 1
        trace.write_bytes(data.replace(name, damaged))
    else:
        conn = sqlite3.connect(trace)
        bad = f"CAST(x'{NOT_UTF8.hex()}' AS TEXT)"
        if where.startswith("meta"):
            key, value = (bad, "'1'") if where == "meta key" else ("'name'", bad)
            conn.execute(f"INSERT OR REPLACE INTO meta(key, value) VALUES ({key}, {value})")
        else:
            texts = [r[1] for r in conn.execute(f"PRAGMA table_info({where})")
                     if r[2] == "TEXT"]
            assert texts, where
            conn.execute(f"UPDATE {where} SET {', '.join(f'{c} = {bad}' for c in texts)}")
        conn.commit()
        conn.close()
    _check_views(run, capsys)
