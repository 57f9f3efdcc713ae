"""The ranks of one launch: rank 0 waits for the others' traces, then speaks for them all.

Every rank records its own trace in the shared run folder (``rank<N>/trace.sqlite``) and
analyses it at its end. Rank 0 alone prints: it waits (bounded) until every rank's trace
is finished, then reads the run as one (``analysis.runs.run_report``), so its summary says
which ranks leak. A rank whose trace never appears (another node without a shared
folder) or is still running when the wait ends is left out of the summary and named.
"""

from __future__ import annotations

import time
from pathlib import Path

from torchleak.analysis.runs import run_report
from torchleak.report import Report
from torchleak.trace.catalog import run_folder, run_status
from torchleak.trace.reader import open_trace, read_meta, writer_alive
from torchleak.vocab import RunStatus

APPEAR_SECONDS = 10.0  # a rank's trace that has not appeared by then is on another node
FINISH_SECONDS = 60.0  # a rank still running after that is reported as running
POLL_SECONDS = 0.2


def run_summary(folder: Path, world: int, appear: float = APPEAR_SECONDS,
                finish: float = FINISH_SECONDS) -> Report | None:
    """The run's report over every rank's trace, once they are finished (or the wait ends);
    None when it cannot be read (the caller falls back to its own rank's report)."""
    start = time.monotonic()
    while True:
        waiting = _waiting(folder, world, time.monotonic() - start >= appear)
        if not waiting or time.monotonic() - start >= finish:
            break
        time.sleep(POLL_SECONDS)
    run = run_folder(folder)
    if run is None:
        return None
    try:
        report = run_report(run)
    except Exception:  # noqa: BLE001 - the caller prints its own rank's report instead
        return None
    if waiting:
        report.reason += f" (not yet finished: rank{'s' if len(waiting) > 1 else ''} " \
                         f"{', '.join(map(str, waiting))}; see `torchleak report {folder}`)"
    return report


def _waiting(folder: Path, world: int, appeared_only: bool) -> list[int]:
    """Ranks whose trace is missing (until ``appeared_only``) or still running."""
    waiting = []
    for rank in range(world):
        trace = folder / f"rank{rank}" / "trace.sqlite"
        if not trace.is_file():
            if not appeared_only:
                waiting.append(rank)
            continue
        if _running(trace):
            waiting.append(rank)
    return waiting


def _running(trace: Path) -> bool:
    try:
        with open_trace(trace) as opened:
            meta = read_meta(opened.conn)
        if run_status(meta, trace) is RunStatus.RUNNING:
            return True
        return "report" not in meta and bool(writer_alive(trace))  # still analysing
    except Exception:  # noqa: BLE001 - unreadable now (being created): ask again
        return True
