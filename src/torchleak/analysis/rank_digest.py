"""What the cross-rank view knows of one rank, read as cheaply as the rank allows.

- a finished rank: its stored report's verdict, numbers and serious findings, read in
  parts by SQLite, never parsed whole;
- a killed or running rank: the live detector's last judgement (the ``judgements`` row
  of phase 'live' and its called findings), with its memory growth and peak from steps looked up by key.
  Only what came after the judgement is looked at again: few steps (``LIVE_TAIL``), a
  leak already called, or a tail whose main USS grew less than the analysis' own minimum
  for a leak leave the judgement as it is;
- otherwise (no judgement stored, or a tail that grew): the rank analysed now.

``digest_ranks`` spreads the ranks over a process pool when there are many, so a
thousand-rank job is read on every core.
"""

from __future__ import annotations

import json
import os
import sys
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from multiprocessing import get_context
from pathlib import Path
from typing import Any

from torchleak.analysis.signals import MIN_MEMORY_GROWTH
from torchleak.errors import TorchleakError
from torchleak.report import Finding, Report
from torchleak.trace import digest, rows
from torchleak.trace.catalog import RunFolder, run_status
from torchleak.trace.judgements import Judgement, judgement
from torchleak.trace.reader import open_trace
from torchleak.vocab import SERIOUS, RunStatus, Signal

LIVE_TAIL = (64, 0.1)  # steps after the live judgement that are "few": 64, or 10% of it
# What a digest needs of the metadata: the status and whether its writer lives, the
# limits a killed rank's peak is compared with.
META_KEYS = ("status", "pid", "hostname", "limit", "cgroup_limit", "ram_total")
POOL_FROM = 16  # fewer ranks are read in this process (a pool costs more to start)
# Reading ranks is bound by the disk past a few processes, and a rank analysed in full
# holds ~100 MiB: more workers would only add memory.
MAX_WORKERS = 8


@dataclass
class RankDigest:
    rank: int | None
    trace: str
    status: str  # a RunStatus value, or 'unreadable'
    steps: int = 0
    verdict: str = "-"  # leak | no_leak | inconclusive | '-' (not judged)
    source: str = ""  # 'final' | 'live' | 'analysed now' | '' (unreadable)
    reason: str = ""
    judged_at: int | None = None  # the step the verdict was reached at
    findings: list[Finding] = field(default_factory=list)  # serious ones only
    main_uss_slope: float | None = None  # bytes/step
    main_rss_peak: float | None = None
    near_limit: bool = False
    error: str = ""
    report: Report | None = None  # the rank's whole analysis, when asked to keep it

    @property
    def leaks(self) -> bool:
        return self.verdict == "leak"

    @property
    def rate(self) -> float:
        """The rank's measured loss per step: its worst finding's, else its USS slope."""
        top = self.findings[0].bytes_per_step if self.findings else None
        return float(top if top is not None else self.main_uss_slope or 0.0)


def digest_rank(trace: Path, rank: int | None, analyse: bool = True, scan: bool = True,
                keep: bool = False) -> RankDigest:
    """One rank's digest; an unreadable trace becomes a digest saying why, never raises.
    ``analyse`` off: never analyse a rank (stored judgements only); ``scan`` off: nor read
    its steps (a live rank's growth and peak stay unknown), for ``top`` and ``ls``.
    ``keep``: keep the Report when the rank is analysed (rank 0's, drawn in full)."""
    try:
        found = _digest(trace, rank, analyse, scan)
    except (TorchleakError, OSError, ValueError, TypeError, RecursionError, MemoryError) as err:
        return RankDigest(rank, str(trace), "unreadable", error=_first_line(err))
    except Exception as err:  # noqa: BLE001 - one bad rank never hides the others
        return RankDigest(rank, str(trace), "unreadable",
                          error=f"{type(err).__name__}: {_first_line(err)}")
    if not keep:
        found.report = None
    return found


def _digest(trace: Path, rank: int | None, analyse: bool, scan: bool) -> RankDigest:
    with open_trace(trace) as opened:
        conn = opened.conn
        meta = digest.small_meta(conn, META_KEYS)
        status = run_status(meta, trace)
        found = RankDigest(rank, str(trace), status.value, steps=rows.last_step(conn))
        stored = digest.report_parts(conn) if status is not RunStatus.RUNNING else None
        if stored is not None:
            _from_stored(found, stored, conn)
        else:
            live = judgement(conn, "live", report=False)
            if not analyse or _live_stands(live, found.steps, conn):
                _from_live(found, live, conn, scan)
            else:
                _from_analysis(found, conn)
    found.near_limit = status is RunStatus.KILLED and near_limit(meta, found.main_rss_peak)
    return found


def _from_stored(found: RankDigest, stored: dict[str, Any], conn: Any) -> None:
    found.verdict, found.reason, found.source = stored["verdict"], stored["reason"], "final"
    found.judged_at = stored["steps"] or found.steps
    found.main_uss_slope, found.main_rss_peak = stored["main_uss_slope"], stored["main_rss_peak"]
    found.findings = _parsed(digest.report_findings(conn, tuple(s.value for s in SERIOUS)))


def _live_stands(live: Judgement | None, steps: int, conn: Any) -> bool:
    """Whether the live judgement stands for the whole rank, looking only at the steps
    after it."""
    if live is None or live.step is None:
        return False
    after = steps - live.step
    if after <= max(LIVE_TAIL[0], LIVE_TAIL[1] * live.step) or live.verdict == "leak":
        return True
    slope = digest.main_growth(conn, steps, start=live.step)["main_uss_slope"]
    return slope is not None and slope * after < MIN_MEMORY_GROWTH[Signal.MAIN_USS]


def _from_live(found: RankDigest, live: Judgement | None, conn: Any, scan: bool) -> None:
    if scan:
        growth = digest.main_growth(conn, found.steps)
        found.main_uss_slope = growth["main_uss_slope"]
        found.main_rss_peak = growth["main_rss_peak"]
    if live is None:
        return  # not judged yet (a rank that just started, or ``analyse`` off)
    found.verdict, found.reason, found.source = live.verdict, live.reason, "live"
    found.judged_at = live.step
    findings = _findings(conn, "live")
    # A live judgement holds suspects too: only the called ones are the rank's leak (a
    # trace from before the two tiers marks none, and its verdict says leak only on calls).
    called = [f for f in findings if f.called]
    found.findings = called if called or live.tier is not None else findings


def _from_analysis(found: RankDigest, conn: Any) -> None:
    from torchleak.analysis.series import load
    from torchleak.analysis.verdict import build_report

    report = build_report(load(conn))
    found.report = report
    found.verdict, found.reason, found.source = report.verdict, report.reason, "analysed now"
    found.judged_at = report.steps
    found.findings = report.serious
    uss, rss = report.signal("main_uss"), report.signal("main_rss")
    found.main_uss_slope = uss.slope_per_step if uss else None
    found.main_rss_peak = rss.peak_value if rss else None


def _findings(conn: Any, phase: str) -> list[Finding]:
    return _parsed([text for _phase, _step, text in rows.findings(conn, phase)])


def _parsed(texts: list[Any]) -> list[Finding]:
    """The serious findings among these JSON texts (any that is not one is skipped)."""
    found = []
    for text in texts:
        try:
            data = json.loads(text)
        except (ValueError, RecursionError, TypeError):
            continue
        report = Report.from_dict({"verdict": "leak", "steps": 0, "findings": [data]})
        if report is not None and report.findings and report.findings[0].serious:
            found.append(report.findings[0])
    return found


def near_limit(meta: dict[str, Any], peak_rss: Any) -> bool:
    """A killed run whose memory came close to its limit was most likely OOM-killed."""
    limit = meta.get("limit") if isinstance(meta.get("limit"), dict) else None
    value = (limit or {}).get("bytes") or meta.get("cgroup_limit") or meta.get("ram_total")
    return isinstance(value, (int, float)) and isinstance(peak_rss, (int, float)) and (
        peak_rss >= 0.85 * value)


def _first_line(err: BaseException) -> str:
    return (str(err).splitlines() or [""])[0][:300]


def digest_ranks(run: RunFolder, analyse: bool = True, scan: bool = True,
                 workers: int | None = None,
                 known: dict[int | None, RankDigest] | None = None) -> list[RankDigest]:
    """Every rank's digest, rank order; many ranks are read by a pool of processes.
    ``known``: digests already read, not read again."""
    known = known or {}
    jobs = [(trace, run.rank_of(trace), analyse, scan) for trace in run.traces
            if run.rank_of(trace) not in known]
    workers = workers if workers is not None else _cores()
    read = _in_pool(jobs, workers) if len(jobs) >= POOL_FROM and workers > 1 else None
    found = {d.rank: d for d in (read if read is not None else map(_digest_job, jobs))}
    return [known.get(rank) or found[rank] for rank in map(run.rank_of, run.traces)]


def _in_pool(jobs: list[tuple[Path, int | None, bool, bool]],
             workers: int) -> list[RankDigest] | None:
    """The digests read by ``workers`` processes; None when a pool cannot run here (the
    caller then reads them itself)."""
    # fork is cheap, but never fork a process that has torch (and its threads) loaded.
    context = get_context("spawn" if "torch" in sys.modules else "fork")
    chunk = max(1, len(jobs) // (workers * 8))
    try:
        with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
            return list(pool.map(_digest_job, jobs, chunksize=chunk))
    except (BrokenProcessPool, OSError):  # a worker killed (memory), no processes left
        return None


def _cores() -> int:
    """The cores this process may run on, at most ``MAX_WORKERS``."""
    try:
        count = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        count = os.cpu_count() or 1
    return max(1, min(count, MAX_WORKERS))


def _digest_job(job: tuple[Path, int | None, bool, bool]) -> RankDigest:
    return digest_rank(*job)
