"""Every bad input gets a clear one-line message and an exit code; no view writes a trace."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from torchleak.cli import main
from torchleak.errors import EXIT_DATAERR, EXIT_NOINPUT

from .synthetic import LiveWriter, folder_fingerprint, make_trace


def _error(capsys: pytest.CaptureFixture[str], argv: list[str], code: int) -> str:
    assert main(argv) == code
    err = capsys.readouterr().err.strip()
    assert err.startswith("torchleak: error: ") and "\n" not in err and "Traceback" not in err
    return err


@pytest.mark.parametrize("command", ["report", "query", "top"])
def test_missing_run(tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str) -> None:
    argv = [command, str(tmp_path / "nope")] + (["SELECT 1"] if command == "query" else [])
    err = _error(capsys, argv, EXIT_NOINPUT)
    assert "no trace at" in err and "torchleak ls" in err


def test_empty_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "trace.sqlite").write_bytes(b"")
    assert "is empty" in _error(capsys, ["report", str(tmp_path)], EXIT_DATAERR)


def test_corrupt_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "trace.sqlite").write_bytes(b"not a database at all" * 100)
    assert "not an SQLite file" in _error(capsys, ["report", str(tmp_path)], EXIT_DATAERR)


def test_truncated_trace(tmp_path: Path, leak_run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = (leak_run / "trace.sqlite").read_bytes()
    (tmp_path / "trace.sqlite").write_bytes(data[:4096] + b"\0" * 100)
    err = _error(capsys, ["report", str(tmp_path)], EXIT_DATAERR)
    assert str(tmp_path) in err


def test_foreign_sqlite(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    conn = sqlite3.connect(tmp_path / "trace.sqlite")
    conn.execute("CREATE TABLE users(id INTEGER)")
    conn.commit()
    conn.close()
    err = _error(capsys, ["query", str(tmp_path), "SELECT 1"], EXIT_DATAERR)
    assert "not a torchleak trace" in err


def test_newer_schema(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = make_trace(tmp_path / "run")
    conn = sqlite3.connect(path)
    conn.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (json.dumps(99),))
    conn.commit()
    conn.close()
    err = _error(capsys, ["report", str(path)], EXIT_DATAERR)
    assert "schema v99" in err and "upgrade torchleak" in err


def test_empty_run_still_starting(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = make_trace(tmp_path / "run", steps=0, status="running")
    writer = LiveWriter(path.parent)
    try:
        err = _error(capsys, ["report", str(path.parent)], 65)
    finally:
        writer.release()
    assert "no steps recorded yet" in err and "torchleak top" in err


def test_empty_finished_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = make_trace(tmp_path / "run", steps=0, status="finished", report=False)
    err = _error(capsys, ["report", str(path.parent)], 65)
    assert "recorded no training steps" in err and "optimizer.step()" in err


def test_views_never_modify_the_trace(leak_run: Path, capsys: pytest.CaptureFixture[str],
                                      tmp_path: Path) -> None:
    before = folder_fingerprint(leak_run)
    for argv in (["report", str(leak_run)], ["report", str(leak_run), "--format", "json"],
                 ["report", str(leak_run), "-o", str(tmp_path / "r.html")],
                 ["query", str(leak_run), "SELECT * FROM python.torch_trace"],
                 ["top", str(leak_run), "--once"], ["ls", "--runs-dir", str(leak_run.parent)]):
        assert main(argv) == 0, argv
    assert main(["query", str(leak_run), "DELETE FROM steps"]) == EXIT_DATAERR
    assert main(["query", str(leak_run), "UPDATE meta SET value='1'"]) == EXIT_DATAERR
    assert main(["query", str(leak_run), f"ATTACH DATABASE '{tmp_path / 'x.db'}' AS x"]) == EXIT_DATAERR
    assert main(["query", str(leak_run), "PRAGMA user_version = 7"]) == EXIT_DATAERR
    capsys.readouterr()
    assert folder_fingerprint(leak_run) == before
    assert not (tmp_path / "x.db").exists()
