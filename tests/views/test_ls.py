"""`torchleak ls` and run resolution: statuses, verdicts, newest run, runs folder options."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from torchleak.cli import main
from torchleak.views.runs import find_traces, resolve_run, summarize

from .synthetic import make_trace

DEAD_PID = 2**22 + 4321  # above the default pid_max: never a live process


@pytest.fixture
def runs(tmp_path: Path) -> Path:
    folder = tmp_path / "runs"
    make_trace(folder / "leaky-20250101-000000", name="leaky")
    make_trace(folder / "clean-20250101-000001", leak=False, cuda=False, name="clean")
    make_trace(folder / "crashy-20250101-000002", status="crashed", report=False, name="crashy")
    make_trace(folder / "gone-20250101-000003", status="running", pid=DEAD_PID, name="gone")
    make_trace(folder / "live-20250101-000004", status="running", name="live")
    (folder / "broken-20250101-000005").mkdir()
    (folder / "broken-20250101-000005" / "trace.sqlite").write_bytes(b"garbage" * 10)
    return folder


def test_ls_table(runs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ls", "--runs-dir", str(runs)]) == 0
    captured = capsys.readouterr()
    lines = {line.split("|")[0].strip(): line for line in captured.out.splitlines()}
    assert "leak (1)" in lines["leaky-20250101-000000"] and "finished" in lines["leaky-20250101-000000"]
    assert "no_leak" in lines["clean-20250101-000001"]
    assert "crashed" in lines["crashy-20250101-000002"]
    assert "killed" in lines["gone-20250101-000003"]
    assert "running" in lines["live-20250101-000004"]
    assert "unreadable" in lines["broken-20250101-000005"]
    assert "335 MiB" in lines["leaky-20250101-000000"]  # peak main RSS
    assert captured.out.splitlines()[-1] == "(6 runs)"
    assert "not an SQLite file" in captured.err


def test_ls_json_and_env(runs: Path, capsys: pytest.CaptureFixture[str],
                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TORCHLEAK_RUNS_DIR", str(runs))
    assert main(["ls", "--format", "json"]) == 0
    data = {r["run"]: r for r in json.loads(capsys.readouterr().out)}
    assert data["leaky-20250101-000000"]["steps"] == 60
    assert data["leaky-20250101-000000"]["verdict"] == "leak"
    assert data["gone-20250101-000003"]["status"] == "killed"


def test_ls_empty_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ls", "--runs-dir", str(tmp_path / "none")]) == 0
    assert "no runs in" in capsys.readouterr().err


def test_resolve_run_by_name_and_newest(runs: Path) -> None:
    readable = [p for p in find_traces(runs) if not summarize(p).error]
    newest = max(readable, key=lambda p: summarize(p).start_time or 0.0)
    assert resolve_run(None, runs) == newest
    assert resolve_run("leaky", runs).parent.name == "leaky-20250101-000000"
    assert resolve_run(str(runs / "clean-20250101-000001"), runs).name == "trace.sqlite"


def test_report_defaults_to_newest_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    make_trace(tmp_path / "older-1", name="older")
    make_trace(tmp_path / "newer-2", name="newer")  # written later: a later start_time
    assert main(["report", "--runs-dir", str(tmp_path), "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["run"]["name"] == "newer"
