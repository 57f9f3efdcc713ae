"""The runs folder: where runs live, which is newest, and one summary line per run."""

from __future__ import annotations

import os
import sqlite3
from dataclasses import dataclass
from pathlib import Path

from torchleak.errors import InputNotFound, TorchleakError
from torchleak.trace.reader import resolve_trace_path
from torchleak.trace.schema import TRACE_FILENAME
from torchleak.views.findings import findings_from_table, report_from_dict
from torchleak.views.source import open_trace, read_state

RUNS_DIR_ENV = "TORCHLEAK_RUNS_DIR"
DEFAULT_RUNS_DIR = "torchleak-runs"


def runs_dir(override: str | Path | None = None) -> Path:
    if override:
        return Path(override)
    return Path(os.environ.get(RUNS_DIR_ENV) or DEFAULT_RUNS_DIR)


def find_traces(folder: Path) -> list[Path]:
    """Every ``<run>/trace.sqlite`` under ``folder`` (one level, as `torchleak run` writes),
    and ``<run>/rank<N>/trace.sqlite`` for runs under torchrun."""
    if not folder.is_dir():
        return []
    found = list(folder.glob(f"*/{TRACE_FILENAME}")) + list(folder.glob(f"*/rank*/{TRACE_FILENAME}"))
    return sorted(p for p in found if p.is_file())


@dataclass
class RunSummary:
    path: Path
    name: str
    script: str
    status: str
    steps: int
    verdict: str
    findings: int
    peak_rss: float | None
    peak_cuda: float | None
    start_time: float | None
    error: str = ""  # why the trace could not be read


def summarize(path: Path) -> RunSummary:
    """One line of `torchleak ls`; an unreadable trace becomes a line saying why."""
    try:
        path, conn = open_trace(path)
    except TorchleakError as err:
        return _unreadable(path, str(err))
    try:
        state = read_state(path, conn)
        rss = conn.execute("SELECT MAX(rss) FROM steps").fetchone()[0]
        cuda = conn.execute("SELECT MAX(reserved) FROM cuda_samples").fetchone()[0]
        verdict, count = _verdict(state.meta.get("report"), conn, state.running)
    except (TorchleakError, sqlite3.DatabaseError) as err:
        return _unreadable(path, str(err))
    finally:
        conn.close()
    start = state.meta.get("start_time")
    return RunSummary(path, state.name, str(state.meta.get("script") or ""), state.status,
                      state.steps, verdict, count, rss, cuda,
                      float(start) if isinstance(start, (int, float)) else _mtime(path))


def _verdict(recorded: object, conn: sqlite3.Connection, running: bool) -> tuple[str, int]:
    report = report_from_dict(recorded)
    if report is not None:
        return report.verdict, len(report.findings)
    online = findings_from_table(conn)
    if online:
        return "leak?", len(online)  # online detection, not yet confirmed by the analysis
    return ("-" if running else "not analysed"), 0


def _unreadable(path: Path, error: str) -> RunSummary:
    return RunSummary(path, path.parent.name, "", "unreadable", 0, "-", 0, None, None,
                      _mtime(path), error)


def _mtime(path: Path) -> float | None:
    try:
        return path.stat().st_mtime
    except OSError:
        return None


def list_runs(folder: Path) -> list[RunSummary]:
    """Oldest first, like `ls -tr`: the newest run is the last line, nearest the prompt."""
    runs = [summarize(p) for p in find_traces(folder)]
    return sorted(runs, key=lambda r: (r.start_time or 0.0, r.path.as_posix()))


def newest_run(folder: Path) -> Path:
    runs = [r for r in list_runs(folder) if not r.error]
    if not runs:
        raise InputNotFound(
            f"no runs in {folder.resolve()}: record one with `torchleak run train.py`, "
            f"or point ${RUNS_DIR_ENV} / --runs-dir at your runs folder")
    return runs[-1].path


def resolve_run(run: str | None, folder: str | Path | None = None) -> Path:
    """A run given as a path, as a folder name in the runs folder, or (None) the newest."""
    base = runs_dir(folder)
    if run is None:
        return newest_run(base)
    if Path(run).exists():
        return resolve_trace_path(run)
    named = [p for p in find_traces(base) if p.parent.name == run or p.parent.name.startswith(f"{run}-")]
    if named:
        return max(named, key=lambda p: p.parent.name)
    return resolve_trace_path(run)  # raises InputNotFound with the usual advice
