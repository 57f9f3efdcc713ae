"""One report for a job of many ranks, sized by the ranks that leak, not by the job.

The leaking ranks are named one by one, with their holder and rate; every other rank
is counted (by status, by verdict, by where its verdict came from) and described by a
distribution (its main process' growth and peak), never one line each. Rank 0's own
report carries the detail of rank 0; ``report DIR --rank N`` gives any rank's in full.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from pathlib import Path
from statistics import median
from typing import Any

from torchleak.analysis.rank_digest import RankDigest, digest_rank, digest_ranks
from torchleak.analysis.runs import compress_ranks, trace_report
from torchleak.errors import BadInput
from torchleak.report import Finding, Report, Signal
from torchleak.trace import digest as trace_digest
from torchleak.trace.catalog import RunFolder
from torchleak.trace.reader import open_trace
from torchleak.units import format_bytes

FINDINGS = 6  # distinct findings of the leaking ranks carried in full (the worst first)
CHARTED_RANKS = 4  # leaking ranks drawn beside rank 0 on the "main USS per rank" chart
NAMED_IN_REASON = 4


def job_report(run: RunFolder, workers: int | None = None,
               known: dict[int | None, RankDigest] | None = None) -> Report:
    """The job's report: rank 0's, with the job's summary in ``job``, the leaking ranks in
    ``ranks``, their serious findings and their main USS on one chart. ``known``: digests
    of finished ranks read already (rank 0's end-of-job wait)."""
    known = {r: d for r, d in (known or {}).items() if d.source == "final"}
    rank0 = run.rank_of(run.traces[0])
    if rank0 not in known:  # read here, keeping its analysis if it needs one: drawn in full
        known[rank0] = digest_rank(run.traces[0], rank0, keep=True)
    digests = digest_ranks(run, workers=workers, known=known)
    main = _main_report(run.traces[0], digests[0])
    leaking = sorted((d for d in digests if d.leaks), key=lambda d: -d.rate)
    main.job = job_summary(digests)
    main.ranks = [rank_line(d) for d in leaking]
    if leaking and main.verdict != "leak":
        main.verdict = "leak"
    # Rank 0's small findings as its report has them; every serious one, rank 0's with the
    # others', once per holder.
    main.findings = _grouped(leaking) + [_of_ranks([digests[0].rank], f)
                                         for f in main.findings if not f.serious]
    others = [d for d in leaking if d is not digests[0]]
    main.reason = ranks_sentence(main.job, main.ranks) + (
        f"; rank {digests[0].rank}: {digests[0].reason}" if digests[0].reason else "")
    main.steps = max(d.steps for d in digests)
    charted = [digests[0]] + others[:CHARTED_RANKS]
    main.signals += [s for s in map(_rank_signal, charted) if s is not None]
    return main


def job_view(run: RunFolder, workers: int | None = None) -> Report:
    """The job as ``top`` shows it: stored and live judgements only, no rank analysed and
    no steps read, so a refresh costs a metadata read per rank."""
    from torchleak.analysis.verdict import run_info

    digests = digest_ranks(run, analyse=False, scan=False, workers=workers)
    leaking = sorted((d for d in digests if d.leaks), key=lambda d: -d.rate)
    meta: dict[str, Any] = {}
    try:
        with open_trace(run.traces[0]) as opened:
            meta = trace_digest.small_meta(opened.conn)
    except Exception:  # noqa: BLE001 - rank 0 unreadable: the others still speak
        pass
    running = any(d.status == "running" for d in digests)
    report = Report(verdict="leak" if leaking else _common_verdict(digests),
                    steps=max(d.steps for d in digests), run=run_info(meta),
                    findings=[_of_ranks([d.rank], f) for d in leaking[:1] for f in d.findings],
                    source="live" if running else "final")
    report.job = job_summary(digests)
    report.ranks = [rank_line(d) for d in leaking]
    report.reason = ranks_sentence(report.job, report.ranks)
    report.run.update(status="running" if running else _common_status(digests),
                      trace=str(run.traces[0]), name=run.name,
                      judged=any(d.verdict != "-" for d in digests))
    return report


def _common_verdict(digests: list[RankDigest]) -> str:
    verdicts = {d.verdict for d in digests}
    return "no_leak" if verdicts == {"no_leak"} else "inconclusive"


def _common_status(digests: list[RankDigest]) -> str:
    """A job that is no longer running: killed when any rank was, else rank 0's status."""
    statuses = [d.status for d in digests]
    return "killed" if "killed" in statuses else statuses[0]


def _main_report(trace: Path, first: RankDigest) -> Report:
    """Rank 0's report: stored, analysed (once: its digest kept the analysis), or its live
    judgement as is."""
    from torchleak.analysis.verdict import run_info

    if first.report is not None:
        report = first.report
        report.source = "analysed now" if first.status != "running" else "live"
        report.run.update(status=first.status, trace=str(trace))
        if first.near_limit:
            report.run["status_note"] = "killed (OOM?)"
        return report
    if first.source != "live":
        try:
            return trace_report(trace)
        except Exception:  # noqa: BLE001 - an unreadable rank 0 is one rank of many
            pass
    meta: dict[str, Any] = {}
    if first.status != "unreadable":
        with open_trace(trace) as opened:
            meta = trace_digest.small_meta(opened.conn)
    report = Report(verdict=first.verdict if first.verdict != "-" else "inconclusive",
                    steps=first.steps, findings=list(first.findings), reason=first.reason,
                    run=run_info(meta), source=first.source or "unreadable")
    report.run.update(status=first.status, trace=str(trace))
    if first.near_limit:
        report.run["status_note"] = "killed (OOM?)"
    return report


def job_summary(digests: list[RankDigest]) -> dict[str, Any]:
    """Counts and distributions over every rank: what a thousand flat ranks come down to."""
    by_verdict: dict[str, list[int]] = {}
    for d in digests:
        key = d.verdict if d.status != "unreadable" else "unreadable"
        by_verdict.setdefault(key if key != "-" else "not judged", []).append(_rank(d))
    growth = [d.main_uss_slope for d in digests if d.main_uss_slope is not None]
    peak = [d.main_rss_peak for d in digests if d.main_rss_peak is not None]
    return {
        "ranks": len(digests),
        "status": dict(Counter(d.status for d in digests).most_common()),
        "verdicts": {k: len(v) for k, v in by_verdict.items()},
        "leaking": sorted(by_verdict.get("leak", [])),
        "flat": compress_ranks(by_verdict.get("no_leak", [])),
        "other": {k: compress_ranks(v) for k, v in by_verdict.items()
                  if k not in ("leak", "no_leak")},
        "sources": dict(Counter(d.source for d in digests if d.source).most_common()),
        "main_uss_growth": _spread(growth),
        "main_rss_peak": _spread(peak),
        "killed_near_limit": sorted(_rank(d) for d in digests if d.near_limit),
        "unreadable": [{"rank": d.rank, "error": d.error} for d in digests if d.error][:10],
    }


def _spread(values: list[float]) -> dict[str, float] | None:
    if not values:
        return None
    return {"min": min(values), "median": float(median(values)), "max": max(values)}


def rank_line(d: RankDigest) -> dict[str, Any]:
    top = d.findings[0] if d.findings else None
    return {"rank": d.rank, "verdict": d.verdict, "status": d.status, "steps": d.steps,
            "source": d.source, "judged_at": d.judged_at,
            "main_uss_slope": d.main_uss_slope or 0.0,
            "top_finding": top.culprit if top else None,
            "holder_path": top.holder_path if top else None,
            "bytes_per_step": top.bytes_per_step if top else None,
            "detected_at_step": top.detected_at_step if top else None}


def ranks_sentence(job: dict[str, Any], lines: list[dict[str, Any]]) -> str:
    """'rank 1 grows +2.1 MiB/step; ranks 0, 2-1023 flat'."""
    parts = [f"rank {line['rank']} grows "
             f"{format_bytes(line['bytes_per_step'] or line['main_uss_slope'], signed=True)}"
             "/step" for line in lines[:NAMED_IN_REASON]]
    if len(lines) > NAMED_IN_REASON:
        parts.append(f"{len(lines) - NAMED_IN_REASON} more ranks leak "
                     f"({compress_ranks([line['rank'] for line in lines[NAMED_IN_REASON:]])})")
    flat = job["verdicts"].get("no_leak", 0)
    if flat:
        parts.append(f"rank{'s' if flat > 1 else ''} {job['flat']} flat")
    for verdict, ranks in job["other"].items():
        count = job["verdicts"][verdict]
        parts.append(f"rank{'s' if count > 1 else ''} {ranks} {verdict}")
    return "; ".join(parts)


def _rank(d: RankDigest) -> int:
    return d.rank if d.rank is not None else -1


def _grouped(leaking: list[RankDigest]) -> list[Finding]:
    """The leaking ranks' serious findings, one per holder: ranks that leak through the same
    holder (the same code on every rank) share one finding, named with all their ranks."""
    groups: dict[tuple[str, str], tuple[Finding, list[int | None]]] = {}
    for d in leaking:
        for finding in d.findings:
            key = (finding.kind, finding.holder_path or finding.signal or finding.culprit)
            if key not in groups:
                groups[key] = (finding, [])
            groups[key][1].append(d.rank)
    return [_of_ranks(ranks, finding) for finding, ranks in list(groups.values())[:FINDINGS]]


def _of_ranks(ranks: list[int | None], finding: Finding) -> Finding:
    named = compress_ranks([r for r in ranks if r is not None], 60)
    label = f"rank{'s' if len(ranks) > 1 else ''} {named}: "
    if finding.culprit.startswith(label):
        return finding
    return dataclasses.replace(finding, culprit=label + finding.culprit)


def _rank_signal(d: RankDigest) -> Signal | None:
    """A rank's main USS, drawn with the other named ranks' on one chart."""
    if d.status == "unreadable":
        return None
    try:
        with open_trace(Path(d.trace)) as opened:
            steps, values = trace_digest.main_uss_points(opened.conn)
    except Exception:  # noqa: BLE001 - a chart line is not worth failing the report
        return None
    if not values:
        return None
    return Signal(name=f"rank{d.rank}_main_uss", unit="bytes",
                  verdict="growing" if d.leaks else "healthy", slope_per_step=d.main_uss_slope,
                  start_value=values[0], end_value=values[-1], peak_value=max(values),
                  last_step=int(steps[-1]),
                  label=f"rank {d.rank} ({'leaks' if d.leaks else 'flat'})",
                  chart="ranks", chart_title="main USS per rank", primary=d.leaks, steps=steps,
                  values=values)


def run_report(run: RunFolder, rank: int | None = None) -> Report:
    """One rank: its report. Several: the job's (``analysis.job``); ``rank``: that rank's
    full report."""
    if rank is not None:
        return trace_report(rank_trace(run, rank))
    if len(run.traces) == 1:
        return trace_report(run.traces[0])
    return job_report(run)


def rank_trace(run: RunFolder, rank: int) -> Path:
    """The trace of one rank of a job; a clear error naming the ranks there are."""
    for trace in run.traces:
        if run.rank_of(trace) == rank:
            return trace
    if run.ranks == 1 and rank == 0:
        return run.traces[0]
    have = compress_ranks([r for r in map(run.rank_of, run.traces) if r is not None])
    raise BadInput(f"{run.path} has no rank {rank} (its ranks: {have or 'one trace, no ranks'})"
                   ": pass one of those to --rank")
