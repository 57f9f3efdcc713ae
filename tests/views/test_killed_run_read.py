"""A killed run is read where it lies: no temporary copy of its trace, so a full
temporary folder does not matter; without its -shm file (a folder copied without it)
the copy is needed, and a temporary folder without room for it says so in one line."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

STEPS = 20_000  # a trace of ~2 MiB, all of it in the WAL the killed writer left


@pytest.fixture
def tiny_tmp(tmp_path: Path) -> Iterator[Path]:
    """A 1 MiB temporary folder: smaller than the trace."""
    mount = tmp_path / "tiny"
    mount.mkdir()
    if shutil.which("mount") is None or subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mount)],
            capture_output=True).returncode != 0:
        pytest.skip("cannot mount a small tmpfs here (needs root)")
    yield mount
    subprocess.run(["umount", str(mount)], capture_output=True)


def _killed_run(folder: Path) -> Path:
    run = folder / "killed"
    writer = Path(__file__).with_name("live_writer.py")
    subprocess.run([sys.executable, str(writer), str(run), str(STEPS), "0", "--no-finish"],
                   check=True, timeout=120)
    assert (run / "trace.sqlite-wal").stat().st_size > (1 << 20)
    return run


def _torchleak(*args: str, tmpdir: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, TMPDIR=str(tmpdir))
    return subprocess.run([sys.executable, "-m", "torchleak", *args], env=env, text=True,
                          capture_output=True, timeout=120)


def _files(run: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(run.iterdir())}


def test_a_killed_run_is_read_without_a_copy(tmp_path: Path, tiny_tmp: Path) -> None:
    run = _killed_run(tmp_path)
    before = _files(run)
    proc = _torchleak("query", str(run), "SELECT MAX(step) FROM steps", tmpdir=tiny_tmp)
    assert proc.returncode == 0, proc.stderr
    assert str(STEPS) in proc.stdout  # the last commit, from the WAL
    assert _torchleak("report", str(run), tmpdir=tiny_tmp).returncode in (0, 3)
    assert _files(run) == before
    assert not list(tiny_tmp.iterdir())


def test_without_its_shm_file_a_full_tmp_says_so_in_one_line(tmp_path: Path,
                                                              tiny_tmp: Path) -> None:
    run = _killed_run(tmp_path)
    (run / "trace.sqlite-shm").unlink()
    proc = _torchleak("query", str(run), "SELECT MAX(step) FROM steps", tmpdir=tiny_tmp)
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "TMPDIR" in lines[0] and "copy" in lines[0], proc.stderr
    roomy = _torchleak("query", str(run), "SELECT MAX(step) FROM steps", tmpdir=tmp_path)
    assert roomy.returncode == 0 and str(STEPS) in roomy.stdout, roomy.stderr
    assert not (run / "trace.sqlite-shm").exists()
