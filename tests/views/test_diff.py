"""`torchleak diff` on traces of different lengths, runs in progress and bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from torchleak.cli import main

from .synthetic import LiveWriter, make_trace


def test_runs_of_different_lengths_compare_by_rate(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    short = make_trace(tmp_path / "short", steps=60, leak=True).parent
    long = make_trace(tmp_path / "long", steps=120, leak=False).parent
    assert main(["diff", str(short), str(long), "--json", "-", "--fail-if-worse"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["a"]["steps"] == 60 and data["b"]["steps"] == 120
    assert [h["name"] for h in data["gone"]] == ["losses"]
    main_uss = next(s for s in data["signals"] if s["signal"] == "main_uss")
    assert main_uss["a_slope"] == pytest.approx(256 * 1024, rel=0.05)
    assert main(["diff", str(long), str(short), "--fail-if-worse"]) == 3


def test_a_run_in_progress_is_compared_as_far_as_it_got(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    done = make_trace(tmp_path / "done", steps=60, leak=False).parent
    running = make_trace(tmp_path / "running", steps=40, leak=True, status="running").parent
    writer = LiveWriter(running)  # the run's recorder still holds its trace
    try:
        code = main(["diff", str(done), str(running), "--fail-if-worse"])
    finally:
        writer.release()
    text = capsys.readouterr().out
    assert "(running, 40 steps)" in text
    assert code == 3 and "B leaks where A did not" in text


def test_bad_input_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    done = make_trace(tmp_path / "done", steps=60, leak=False).parent
    assert main(["diff", str(done), str(tmp_path / "missing")]) == 66
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "torchleak: error:" in err
    assert main(["diff", str(done), str(done), "--peak-threshold", "-1"]) == 64
