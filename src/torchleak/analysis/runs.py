"""Reports and one-line summaries of recorded runs, for ``report`` and ``ls``.

A finished run's own report (written at its end) is used as it is; a running, killed or
unanalysed run is analysed now from its trace, so ``report`` after a ``kill -9`` gives
the same holder and fix a clean end would have. A run of several ranks (a job) is
summarised by ``analysis.job`` (``run_report``), which uses each killed rank's stored live
judgement.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from torchleak.analysis.rank_digest import near_limit
from torchleak.analysis.series import load
from torchleak.analysis.verdict import build_report
from torchleak.errors import BadInput, TorchleakError, TraceError
from torchleak.report import Report
from torchleak.trace import rows
from torchleak.trace.catalog import RunFolder, run_status, start_time
from torchleak.trace.judgements import judgement
from torchleak.trace.reader import open_trace, read_meta
from torchleak.vocab import RunStatus


def trace_report(trace: Path) -> Report:
    """The Report of one trace: its recorded one when finished, else analysed now."""
    with open_trace(trace) as opened:
        meta = read_meta(opened.conn)
        status = run_status(meta, trace)
        if rows.last_step(opened.conn) == 0:
            raise BadInput(_empty_message(trace.parent, status))
        final = judgement(opened.conn, "final")
        recorded = Report.from_dict(final.report) if final is not None else None
        if recorded is not None and status is not RunStatus.RUNNING:
            report, source = recorded, "recorded at the end of the run"
        else:
            try:
                report = build_report(load(opened.conn))
            except Exception as err:  # noqa: BLE001 - a trace we cannot analyse: say why
                raise TraceError(f"cannot analyse {trace}: {type(err).__name__}: {err}") from None
            source = "analysed now" if status is not RunStatus.RUNNING else "live"
    report.source = source
    report.run["status"] = status.value
    report.run["trace"] = str(trace)
    main = report.signal("main_rss")
    if status is RunStatus.KILLED and main is not None and near_limit(meta, main.peak_value):
        report.run["status_note"] = "killed (OOM?)"
    return report


def _empty_message(folder: Path, status: RunStatus) -> str:
    if status is RunStatus.RUNNING:
        return (f"run {folder} has no steps recorded yet (still starting up): watch it with "
                f"`torchleak top {folder}`, or try again in a moment")
    return (f"run {folder} ({status.value}) recorded no training steps: torchleak counts a "
            "step at each optimizer.step(), else at each forward call of the outermost model; "
            "did the script reach its loop?")


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
    ranks: int = 1
    guard: str | None = None
    safe: int = 0
    error: str = ""  # why the trace could not be read
    overhead: dict[str, Any] = field(default_factory=dict)  # torchleak's own cost, when known
    leaking: list[int | None] = field(default_factory=list)  # a job's leaking ranks
    live: bool = False  # the verdict is the live detector's (no final judgement)


def summarize(run: RunFolder) -> RunSummary:
    """One line of `torchleak ls`; an unreadable trace becomes a line saying why."""
    try:
        return _summarize(run)
    except (TorchleakError, OSError, ValueError, TypeError, RecursionError, MemoryError) as err:
        return RunSummary(run.path, run.name, "", "unreadable", 0, "-", 0, None, None,
                          _mtime(run.path), run.ranks, error=str(err).splitlines()[0][:300])
    except Exception as err:  # noqa: BLE001 - one bad trace never hides the others
        return RunSummary(run.path, run.name, "", "unreadable", 0, "-", 0, None, None,
                          _mtime(run.path), run.ranks, error=f"{type(err).__name__}: {err}")


def _summarize(run: RunFolder) -> RunSummary:
    trace = run.traces[0]
    with open_trace(trace) as opened:
        conn = opened.conn
        meta = read_meta(conn)
        status = run_status(meta, trace)
        steps = rows.last_step(conn)
        peak_rss = rows.peak(conn, "steps", "rss")
        peak_cuda = rows.peak(conn, "cuda_samples", "reserved")
        final = judgement(conn, "final") if status is not RunStatus.RUNNING else None
        recorded = Report.from_dict(final.report) if final is not None else None
        verdict, count, live = _verdict(recorded, conn, status)
    job = None
    if run.ranks > 1:  # a job leaks when any of its ranks leaks: its digests say which
        job = _job_line(run)
        verdict, count, live = job["verdict"], job["findings"], job["live"]
        steps = max(steps, job["steps"])
        peak_rss = max((p for p in (peak_rss, job["peak_rss"]) if p is not None), default=None)
    start = meta.get("start_time")
    guard = meta.get("guard") if isinstance(meta.get("guard"), dict) else None
    safe = meta.get("safe") if isinstance(meta.get("safe"), list) else []
    shown = status.value
    if status is RunStatus.KILLED and near_limit(meta, peak_rss):
        shown = "killed (OOM?)"
    if job is not None:
        shown = job["status"]
    return RunSummary(run.path, str(meta.get("name") or run.name), str(meta.get("script") or ""),
                      shown, steps, verdict, count, peak_rss, peak_cuda,
                      float(start) if isinstance(start, (int, float)) else start_time(run),
                      run.ranks, f"{guard.get('mode')} at step {guard.get('step')}" if guard
                      else None, len(safe), overhead=dict(recorded.overhead) if recorded
                      else {},
                      leaking=job["leaking"] if job else [], live=live)


def _job_line(run: RunFolder) -> dict[str, Any]:
    """A job in one line of ``ls``: its ranks by status, the leaking ones, their findings.
    Stored and live judgements only: listing never analyses a rank."""
    from torchleak.analysis.rank_digest import digest_ranks

    digests = digest_ranks(run, analyse=False, scan=False)
    counts: dict[str, int] = {}
    for d in digests:
        counts[d.status] = counts.get(d.status, 0) + 1
    leaking = [d for d in digests if d.leaks]
    live = any(d.source == "live" for d in leaking)
    verdict = ("leak" if leaking else "no_leak" if all(d.verdict == "no_leak" for d in digests)
               else "-" if any(d.status == "running" for d in digests) else "not analysed")
    return {"status": ", ".join(f"{n} {s}" for s, n in counts.items()), "verdict": verdict,
            "leaking": [d.rank for d in leaking], "live": live,
            "steps": max(d.steps for d in digests),
            "findings": sum(len(d.findings) for d in leaking),
            "peak_rss": max((d.main_rss_peak for d in digests if d.main_rss_peak is not None),
                            default=None)}


def _verdict(recorded: Report | None, conn: Any,
             status: RunStatus) -> tuple[str, int, bool]:
    """The final verdict, else the live detector's latest (its called findings): (verdict,
    findings, whether it is the live detector's)."""
    if recorded is not None:
        return recorded.verdict, len(recorded.serious), False
    live = judgement(conn, "live")
    report = Report.from_dict(live.report) if live is not None else None
    if live is not None:
        return live.verdict, len(report.called) if report else 0, True
    return ("-" if status is RunStatus.RUNNING else "not analysed"), 0, False


def _mtime(path: Path) -> float | None:
    try:
        return path.stat().st_mtime
    except OSError:
        return None


RANKS_TEXT = 120  # characters of a compressed rank list before it is cut


def compress_ranks(ranks: list[int], limit: int = RANKS_TEXT) -> str:
    """[0, 2, 3, 4, 7] -> '0, 2-4, 7'; cut past ``limit`` characters with the count left."""
    spans: list[str] = []
    ordered = sorted(set(ranks))
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        spans.append(str(ordered[i]) if i == j else f"{ordered[i]}-{ordered[j]}")
        i = j + 1
    text = ", ".join(spans)
    if len(text) <= limit:
        return text
    cut = text[:limit].rsplit(", ", 1)[0]
    shown = sum(_span_size(s) for s in cut.split(", "))
    return f"{cut}, ... ({len(ordered) - shown} more)"


def _span_size(span: str) -> int:
    low, _, high = span.partition("-")
    return int(high) - int(low) + 1 if high else 1
