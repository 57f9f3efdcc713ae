"""`torchleak ls` and run resolution: statuses, verdicts, ranks, newest run, bad traces."""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from torchleak.cli import main
from torchleak.trace.catalog import find_runs, resolve_run, start_time

from .synthetic import LiveWriter, make_trace

DEAD_PID = 2**22 + 4321  # above the default pid_max: never a live process


@pytest.fixture
def runs(tmp_path: Path) -> Iterator[Path]:
    folder = tmp_path / "runs"
    make_trace(folder / "leaky-20250101-000000", name="leaky")
    make_trace(folder / "clean-20250101-000001", leak=False, cuda=False, name="clean")
    make_trace(folder / "crashy-20250101-000002", status="crashed", report=False, name="crashy")
    make_trace(folder / "gone-20250101-000003", status="running", pid=DEAD_PID, name="gone")
    make_trace(folder / "live-20250101-000004", status="running", name="live")
    live = LiveWriter(folder / "live-20250101-000004")
    (folder / "broken-20250101-000005").mkdir()
    (folder / "broken-20250101-000005" / "trace.sqlite").write_bytes(b"garbage" * 10)
    make_trace(folder / "ranks-20250101-000006" / "rank0", leak=False, name="ranks")
    make_trace(folder / "ranks-20250101-000006" / "rank1", name="ranks")
    yield folder
    live.release()


def test_ls_table(runs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ls", "--runs-dir", str(runs)]) == 0
    captured = capsys.readouterr()
    lines = {line.split("|")[0].strip(): line for line in captured.out.splitlines()}
    assert "leak (1)" in lines["leaky-20250101-000000"] and "finished" in lines["leaky-20250101-000000"]
    assert "| no leak " in lines["clean-20250101-000001"]  # words, not the token
    assert "crashed" in lines["crashy-20250101-000002"]
    assert "killed" in lines["gone-20250101-000003"]
    assert "running" in lines["live-20250101-000004"]
    assert "unreadable: " in lines["broken-20250101-000005"] and "not an SQLite file" in lines[
        "broken-20250101-000005"]
    assert "335 MiB" in lines["leaky-20250101-000000"]  # peak main RSS
    assert re.search(r"\|\s+2\s+\|", lines["ranks-20250101-000006"])  # one run, two ranks
    assert captured.out.splitlines()[-1] == "(7 runs)"


@pytest.mark.parametrize("damage", ["bad-json", "future-schema", "huge-value", "deep-value",
                                    "wrong-types", "truncated"])
def test_a_bad_trace_is_one_line_and_hides_no_other_run(runs: Path, damage: str,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    path = make_trace(runs / "damaged-20250101-000009", name="damaged")
    if damage == "truncated":
        path.write_bytes(path.read_bytes()[:3000])
    else:
        conn = sqlite3.connect(path)
        value, key = {"bad-json": ("{not json", "status"),
                      "future-schema": ("99", "schema_version"),
                      "huge-value": ('"' + "x" * 5_000_000 + '"', "report"),
                      "deep-value": ("[" * 100_000 + "]" * 100_000, "report"),
                      "wrong-types": ('{"verdict": 5, "steps": "many", "findings": 3}', "report"),
                      }[damage]
        conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (key, value))
        conn.commit()
        conn.close()
    assert main(["ls", "--runs-dir", str(runs)]) == 0
    out = capsys.readouterr().out
    for good in ("leaky-20250101-000000", "clean-20250101-000001", "ranks-20250101-000006"):
        assert good in out
    assert "damaged-20250101-000009" in out
    assert "Traceback" not in out
    code = main(["report", str(path.parent)])
    err = capsys.readouterr().err
    assert code in (0, 65) and "internal error" not in err and "Traceback" not in err


def test_ls_json_and_env(runs: Path, capsys: pytest.CaptureFixture[str],
                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TORCHLEAK_RUNS_DIR", str(runs))
    assert main(["ls", "--format", "json"]) == 0
    data = {r["run"]: r for r in json.loads(capsys.readouterr().out)}
    assert data["leaky-20250101-000000"]["steps"] == 60
    assert data["leaky-20250101-000000"]["verdict"] == "leak"
    assert data["gone-20250101-000003"]["status"].startswith("killed")
    assert data["ranks-20250101-000006"]["ranks"] == 2


def test_ls_empty_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ls", "--runs-dir", str(tmp_path / "none")]) == 0
    assert "no runs in" in capsys.readouterr().err


def test_resolve_run_by_name_and_newest(runs: Path) -> None:
    newest = max(find_runs(runs), key=start_time)
    assert resolve_run(None, runs) == newest
    assert resolve_run("leaky", runs).path.name == "leaky-20250101-000000"
    assert resolve_run(str(runs / "clean-20250101-000001"), runs).traces[0].name == "trace.sqlite"
    ranks = resolve_run("ranks", runs)
    assert [t.parent.name for t in ranks.traces] == ["rank0", "rank1"]


def test_report_of_a_multi_rank_run_says_which_ranks_leak(runs: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", str(runs / "ranks-20250101-000006"), "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [(r["rank"], r["verdict"]) for r in data["ranks"]] == [(1, "leak")]  # leaking only
    assert data["job"]["flat"] == "0" and data["job"]["leaking"] == [1]
    assert data["verdict"] == "leak" and data["reason"].startswith("rank 1 grows +256 KiB/step; rank 0 flat")


def test_report_defaults_to_newest_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    make_trace(tmp_path / "older-1", name="older")
    make_trace(tmp_path / "newer-2", name="newer")  # written later: a later start_time
    assert main(["report", "--runs-dir", str(tmp_path), "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["run"]["name"] == "newer"
