"""Analysis: pure functions over a trace. Detect, attribute, advise, into one Report.

``analyze(run)`` re-runs the whole analysis on any finished, killed or live trace, so a
report can always be rebuilt from the file alone.
"""

from __future__ import annotations

from pathlib import Path

from torchleak.analysis.series import RunData, RunDataBuilder, load
from torchleak.analysis.verdict import build_report
from torchleak.report import Report

__all__ = ["analyze", "build_report", "load", "RunData", "RunDataBuilder"]


def analyze(trace: str | Path) -> Report:
    """The Report of one trace (a run folder or its trace.sqlite)."""
    from torchleak.trace.reader import open_trace

    with open_trace(trace) as opened:
        report = build_report(load(opened.conn))
        report.run["trace"] = str(opened.path)
    return report
