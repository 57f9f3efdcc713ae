"""The job-scale benchmark's trace stretching (``benchmarks/ranks.py``) on a trace the
recorder wrote: its SQL must follow the steps table as declared, whatever columns it has."""

from __future__ import annotations

import sqlite3
import sys
from pathlib import Path

from benchkit import load_benchmark

from torchleak.record.session import Recorder
from torchleak.trace.tables import STEPS

def _recorded(folder: Path, steps: int) -> Path:
    """A trace of ``steps`` boundaries, each with a memory reading (the recorder's spacing
    of its reads set aside, so no clock decides what the trace holds)."""
    folder.mkdir()
    recorder = Recorder(folder / "trace.sqlite", {"script": "loop.py"})
    recorder.start()
    for _ in range(steps):
        recorder._memory_read_next = 0.0  # a reading at every boundary
        recorder.boundary(sys._getframe())
    recorder.stop("finished", 0)
    recorder.close()
    return folder / "trace.sqlite"


def test_a_stretched_trace_keeps_every_declared_column_and_grows_at_its_rate(
        tmp_path: Path) -> None:
    ranks = load_benchmark("ranks.py", "ranks_benchmark")
    source = _recorded(tmp_path / "source", 40)
    target = tmp_path / "job" / "rank1" / "trace.sqlite"
    ranks.stretch(source, target, 400, grows=True, killed=True)
    conn = sqlite3.connect(target)
    try:
        count, first, last = conn.execute(
            "SELECT COUNT(*), MIN(step), MAX(step) FROM steps").fetchone()
        assert (count, first, last) == (400, 1, 400)
        # Every declared column of a repeated step is copied (none left NULL by the copy).
        for name in STEPS.names:
            recorded, = conn.execute(f"SELECT COUNT({name}) FROM steps WHERE step <= 40"
                                     ).fetchone()
            stretched, = conn.execute(f"SELECT COUNT({name}) FROM steps WHERE step > 40"
                                      ).fetchone()
            assert (stretched > 0) == (recorded > 0), name
        # The leaking rank keeps growing: its last reading is above its recorded ones.
        recorded_top, = conn.execute("SELECT MAX(uss) FROM steps WHERE step <= 40").fetchone()
        end, = conn.execute("SELECT uss FROM steps WHERE step = 400").fetchone()
        assert end > recorded_top
        status, = conn.execute("SELECT value FROM meta WHERE key = 'status'").fetchone()
        assert status == '"running"'  # killed: as after a kill -9
    finally:
        conn.close()
