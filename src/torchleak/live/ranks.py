"""The ranks of one launch: rank 0 waits for the others' traces, then speaks for them all.

Every rank records its own trace in the shared run folder (``rank<N>/trace.sqlite``) and
analyses it at its end. Rank 0 alone prints: it waits (bounded) until every rank's trace
is finished, then reads the run as one (``analysis.job.job_report``), so its summary says
which ranks leak. Each rank is read once: the wait keeps what it read of a rank it found
finished, and the summary uses that. A rank whose trace never appears (another node
without a shared folder) or is still running when the wait ends is left out of the
summary and named.
"""

from __future__ import annotations

import time
from pathlib import Path

from torchleak.analysis.job import job_report
from torchleak.analysis.rank_digest import RankDigest, digest_rank
from torchleak.analysis.job import run_report
from torchleak.report import Report
from torchleak.trace.catalog import run_folder
from torchleak.trace.reader import writer_alive

APPEAR_SECONDS = 10.0  # a rank's trace that has not appeared by then is on another node
FINISH_SECONDS = 60.0  # a rank still running after that is reported as running
POLL_SECONDS = 0.2


def run_summary(folder: Path, world: int, appear: float = APPEAR_SECONDS,
                finish: float = FINISH_SECONDS) -> Report | None:
    """The run's report over every rank's trace, once they are finished (or the wait ends);
    None when it cannot be read (the caller falls back to its own rank's report)."""
    start = time.monotonic()
    done: dict[int | None, RankDigest] = {}  # ranks seen finished: read once, kept
    while True:
        waiting = _waiting(folder, world, time.monotonic() - start >= appear, done)
        if not waiting or time.monotonic() - start >= finish:
            break
        time.sleep(POLL_SECONDS)
    run = run_folder(folder)
    if run is None:
        return None
    try:
        # One pass over the ranks, in this process: a pool would have to start fresh
        # interpreters here (the training process has torch loaded).
        report = job_report(run, workers=1, known=done) if run.ranks > 1 else run_report(run)
    except Exception:  # noqa: BLE001 - the caller prints its own rank's report instead
        return None
    if waiting:
        report.reason += f" (not yet finished: rank{'s' if len(waiting) > 1 else ''} " \
                         f"{', '.join(map(str, waiting))}; see `torchleak report {folder}`)"
    return report


def _waiting(folder: Path, world: int, appeared_only: bool,
             done: dict[int | None, RankDigest]) -> list[int]:
    """Ranks whose trace is missing (until ``appeared_only``) or still running; a rank
    found finished joins ``done`` with its digest, which the summary then uses."""
    waiting = []
    for rank in range(world):
        if rank in done:
            continue
        trace = folder / f"rank{rank}" / "trace.sqlite"
        if not trace.is_file():
            if not appeared_only:
                waiting.append(rank)
            continue
        found = digest_rank(trace, rank, analyse=False, scan=False)
        if found.status in ("running", "unreadable") or (
                found.source != "final" and writer_alive(trace)):
            waiting.append(rank)  # running, still analysing, or being created
        else:
            done[rank] = found
    return waiting
