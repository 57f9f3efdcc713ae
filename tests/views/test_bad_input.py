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


def test_views_leave_a_killed_runs_files_byte_identical(tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    """A writer that died mid-run leaves its WAL (and shared-memory file) behind: every
    view reads the last commits without touching either."""
    import subprocess
    import sys

    run = tmp_path / "killed"
    subprocess.run([sys.executable, str(Path(__file__).with_name("live_writer.py")), str(run),
                    "40", "0", "--no-finish"], check=True, timeout=60)
    assert (run / "trace.sqlite-wal").exists()
    before = folder_fingerprint(run)
    for argv in (["report", str(run)], ["report", str(run), "--format", "json"],
                 ["query", str(run), "SELECT COUNT(*) FROM steps"], ["top", str(run), "--once"],
                 ["ls", "--runs-dir", str(tmp_path)]):
        assert main(argv) == 0, argv
    out = capsys.readouterr().out
    assert "killed" in out and "40" in out  # the WAL's last commits were read
    assert folder_fingerprint(run) == before


def test_views_never_create_side_files(leak_run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    names = sorted(p.name for p in leak_run.iterdir())
    assert "trace.sqlite-wal" not in names and "trace.sqlite-shm" not in names
    for argv in (["report", str(leak_run)], ["top", str(leak_run), "--once"],
                 ["query", str(leak_run), "SELECT 1"]):
        assert main(argv) == 0
    assert sorted(p.name for p in leak_run.iterdir()) == names


def test_a_runaway_query_stops_at_its_timeout(leak_run: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    sql = ("WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n) "
           "SELECT COUNT(*) FROM n")
    err = _error(capsys, ["query", str(leak_run), sql, "--timeout", "1"], EXIT_DATAERR)
    assert "longer than 1 s" in err


def test_ctrl_c_stops_a_runaway_query(leak_run: Path) -> None:
    import signal
    import subprocess
    import sys
    import time

    sql = ("WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n) "
           "SELECT COUNT(*) FROM n")
    # Its own --timeout is far off: an exit 130 before it can only be Ctrl-C's doing.
    proc = subprocess.Popen([sys.executable, "-m", "torchleak", "query", str(leak_run), sql,
                             "--timeout", "3600"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    trace = str((leak_run / "trace.sqlite").resolve())
    deadline = time.monotonic() + 120  # until the query has the trace open (busy machines)
    while not _has_open(proc.pid, trace):
        assert time.monotonic() < deadline and proc.poll() is None, "the query never started"
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    _out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert "Traceback" not in err


def _has_open(pid: int, path: str) -> bool:
    import os

    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return False
    for fd in fds:
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}") == path:
                return True
        except OSError:
            continue
    return False
