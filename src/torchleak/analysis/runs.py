"""Reports and one-line summaries of recorded runs, for ``report`` and ``ls``.

A finished run's own report (written at its end) is used as it is; a running, killed or
unanalysed run is analysed now from its trace, so ``report`` after a ``kill -9`` gives
the same holder and fix a clean end would have. A run of several ranks gets one report
per rank and a line that says which ranks leak.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from torchleak.analysis.series import load
from torchleak.analysis.verdict import build_report
from torchleak.errors import BadInput, TorchleakError, TraceError
from torchleak.report import Finding, Report, Signal
from torchleak.trace import rows
from torchleak.trace.catalog import RunFolder, run_status, start_time
from torchleak.trace.reader import open_trace, read_meta
from torchleak.units import format_bytes
from torchleak.vocab import RunStatus


def trace_report(trace: Path) -> Report:
    """The Report of one trace: its recorded one when finished, else analysed now."""
    with open_trace(trace) as opened:
        meta = read_meta(opened.conn)
        status = run_status(meta, trace)
        if rows.last_step(opened.conn) == 0:
            raise BadInput(_empty_message(trace.parent, status))
        recorded = Report.from_dict(meta.get("report"))
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


def run_report(run: RunFolder) -> Report:
    """One rank: its report. Several: rank 0's, with every rank's verdict in ``ranks``,
    every rank's serious findings (named ``rank N: ...``) and each rank's main-process
    memory as one signal of the chart "main USS per rank"."""
    reports = [trace_report(trace) for trace in run.traces]
    if len(reports) == 1:
        return reports[0]
    main = reports[0]
    ranked = list(zip((run.rank_of(t) for t in run.traces), reports))
    per_rank = [s for s in (_rank_signal(rank, r) for rank, r in ranked) if s]
    main.ranks = [rank_line(rank, r) for rank, r in ranked]
    leaking = [line for line in main.ranks if line["verdict"] == "leak"]
    if leaking and main.verdict != "leak":
        main.verdict = "leak"
    main.reason = ranks_sentence(main.ranks) + (f"; rank {main.ranks[0]['rank']}: "
                                                f"{main.reason}" if main.reason else "")
    main.findings = [_of_rank(rank, f) for rank, r in ranked for f in r.findings
                     if f.serious or rank == ranked[0][0]]
    main.findings.sort(key=lambda f: not f.serious)
    main.steps = max(r.steps for r in reports)
    main.signals += per_rank
    return main


def _of_rank(rank: int | None, finding: Finding) -> Finding:
    return dataclasses.replace(finding, culprit=f"rank {rank}: {finding.culprit}")


def _rank_signal(rank: int | None, report: Report) -> Signal | None:
    """A rank's main USS, drawn with the other ranks' in one chart."""
    main = report.signal("main_uss")
    if main is None:
        return None
    state = "leaks" if report.verdict == "leak" else "flat"
    return dataclasses.replace(main, name=f"rank{rank}_main_uss", label=f"rank {rank} ({state})",
                               chart="ranks", chart_title="main USS per rank",
                               primary=report.verdict == "leak")


def rank_reports(run: RunFolder) -> list[tuple[int | None, Report]]:
    return [(run.rank_of(trace), trace_report(trace)) for trace in run.traces]


def rank_line(rank: int | None, report: Report) -> dict[str, Any]:
    main = report.signal("main_uss")
    top = report.serious[0] if report.serious else None
    return {"rank": rank, "verdict": report.verdict, "steps": report.steps,
            "main_uss_slope": main.slope_per_step if main and main.verdict == "growing" else 0.0,
            "top_finding": top.culprit if top else None,
            "bytes_per_step": top.bytes_per_step if top else None}


def ranks_sentence(lines: list[dict[str, Any]]) -> str:
    """'rank 1 grows 2.1 MiB/step; ranks 0, 2, 3 flat'."""
    grows = [line for line in lines if line["verdict"] == "leak"]
    flat = [str(line["rank"]) for line in lines if line["verdict"] != "leak"]
    parts = [f"rank {line['rank']} grows "
             f"{format_bytes(line['bytes_per_step'] or line['main_uss_slope'], signed=True)}/step"
             for line in grows]
    if flat:
        parts.append(f"rank{'s' if len(flat) > 1 else ''} {', '.join(flat)} flat")
    return "; ".join(parts)


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
        verdict, count = _verdict(meta, conn, status)
    for other in run.traces[1:]:  # a run leaks when any of its ranks leaks
        with open_trace(other) as opened:
            rank_meta = read_meta(opened.conn)
            rank_verdict, rank_count = _verdict(rank_meta, opened.conn,
                                                run_status(rank_meta, other))
        count += rank_count
        if rank_verdict.startswith("leak") and not verdict.startswith("leak"):
            verdict = rank_verdict
    start = meta.get("start_time")
    guard = meta.get("guard") if isinstance(meta.get("guard"), dict) else None
    safe = meta.get("safe") if isinstance(meta.get("safe"), list) else []
    shown = status.value
    if status is RunStatus.KILLED and near_limit(meta, peak_rss):
        shown = "killed (OOM?)"
    return RunSummary(run.path, str(meta.get("name") or run.name), str(meta.get("script") or ""),
                      shown, steps, verdict, count, peak_rss, peak_cuda,
                      float(start) if isinstance(start, (int, float)) else start_time(run),
                      run.ranks, f"{guard.get('mode')} at step {guard.get('step')}" if guard
                      else None, len(safe), overhead=_overhead(meta))


def _verdict(meta: dict[str, Any], conn: Any, status: RunStatus) -> tuple[str, int]:
    report = Report.from_dict(meta.get("report"))
    if report is not None and status is not RunStatus.RUNNING:
        return report.verdict, len(report.serious)
    live = meta.get("live")
    if isinstance(live, dict) and live.get("verdict"):
        return f"{live['verdict']} (live)", int(live.get("findings") or 0)
    return ("-" if status is RunStatus.RUNNING else "not analysed"), 0


def _overhead(meta: dict[str, Any]) -> dict[str, Any]:
    report = meta.get("report")
    found = report.get("overhead") if isinstance(report, dict) else None
    return dict(found) if isinstance(found, dict) else {}


def near_limit(meta: dict[str, Any], peak_rss: Any) -> bool:
    """A killed run whose memory came close to its limit was most likely OOM-killed."""
    limit = meta.get("limit") if isinstance(meta.get("limit"), dict) else None
    value = (limit or {}).get("bytes") or meta.get("cgroup_limit") or meta.get("ram_total")
    return isinstance(value, (int, float)) and isinstance(peak_rss, (int, float)) and (
        peak_rss >= 0.85 * value)


def _mtime(path: Path) -> float | None:
    try:
        return path.stat().st_mtime
    except OSError:
        return None
