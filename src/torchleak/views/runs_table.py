"""How `torchleak ls` shows runs: an aligned table, or JSON for scripts."""

from __future__ import annotations

import json
from typing import Any

from torchleak.analysis.runs import RunSummary, compress_ranks
from torchleak.vocab import verdict_words
from torchleak.units import format_bytes, format_time, number
from torchleak.views.inert import inert_input
from torchleak.views.tabular import format_table


def verdict_text(run: RunSummary, words: bool = True) -> str:
    """"no leak", "leak (live): ranks 3, 7": in words for people, as tokens for scripts
    ("no_leak")."""
    text = verdict_words(run.verdict) if words else run.verdict
    if run.live:
        text += " (live)"
    if run.ranks > 1 and run.leaking:
        ranks = [rank or 0 for rank in run.leaking]
        text += f": rank{'s' if len(ranks) > 1 else ''} {compress_ranks(ranks, 60)}"
    return text


def _verdict(run: RunSummary) -> str:
    if run.error:
        return f"unreadable: {run.error}"
    text = verdict_text(run)
    if run.findings and run.verdict == "leak":
        text = f"{text} ({run.findings})"
    if run.guard:
        text += f", guard {run.guard}"
    if run.safe:
        text += ", --safe"
    return text


@inert_input
def runs_table(runs: list[RunSummary]) -> str:
    with_cuda = any(r.peak_cuda for r in runs)
    with_ranks = any(r.ranks > 1 for r in runs)
    columns = ["run", "status", "steps", "verdict", "peak rss"]
    columns += ["peak cuda"] if with_cuda else []
    columns += ["ranks"] if with_ranks else []
    columns += ["torchleak's cost", "started", "script"]
    rows = []
    for run in runs:
        row: list[object] = [run.path.name, run.status, run.steps, _verdict(run),
                             format_bytes(run.peak_rss)]
        row += [format_bytes(run.peak_cuda)] if with_cuda else []
        row += [run.ranks] if with_ranks else []
        row += [cost_cell(run.overhead), format_time(run.start_time), run.script]
        rows.append(row)
    count = len(runs)
    return format_table(columns, rows, f"({count} run{'s' if count != 1 else ''})")


def cost_cell(overhead: dict[str, Any]) -> str:
    """"1.6%, 1.2 MiB": torchleak's share of a step and its own memory."""
    if not overhead or number(overhead.get("share")) is None:
        return "-"
    text = f"{100 * float(overhead['share']):.2g}%"
    if number(overhead.get("memory_bytes")) is not None:
        text += f", {format_bytes(overhead['memory_bytes'])}"
    return text + (" (over budget)" if overhead.get("over_budget") else "")


def runs_json(runs: list[RunSummary]) -> str:
    data = [{
        "run": r.path.name, "path": str(r.path), "name": r.name, "script": r.script,
        "status": r.status, "steps": r.steps, "verdict": verdict_text(r, words=False),
        "findings": r.findings,
        "peak_rss": r.peak_rss, "peak_cuda": r.peak_cuda, "start_time": r.start_time,
        "ranks": r.ranks, "guard": r.guard, "safe_settings": r.safe, "error": r.error or None,
        "overhead": r.overhead or None,
    } for r in runs]
    return json.dumps(data, indent=2) + "\n"
