"""Everything a renderer draws, gathered once from the trace: the ``RunView``."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field
from pathlib import Path

from torchleak.errors import BadInput
from torchleak.report import Finding, OomProjection, Report, Signal
from torchleak.views.findings import SOURCE_NONE, load_report
from torchleak.views.holders import HolderGrowth, holder_chart, load_holder_growth
from torchleak.views.series import Chart, Line, Mark, load_charts, load_marks
from torchleak.views.source import RunState, open_trace, read_state
from torchleak.views.trend import Trend, fit_trend, is_flat, looks_like_growth
from torchleak.views.units import format_rate

# Where a finding without an explicit signal most likely shows up.
_KIND_SIGNAL = {
    "tensor_growth": "tensor_bytes",
    "autograd_graph": "graph_bytes",
    "graph_retention": "graph_bytes",
    "dataloader_workers": "workers_uss",
    "worker_growth": "workers_uss",
    "cuda_growth": "cuda_allocated",
}


@dataclass
class LineSummary:
    """One row of the signal table: where a signal started, ended, peaked and heads."""

    chart: Chart
    line: Line
    trend: Trend | None
    judged: Signal | None  # the analysis' word on this signal, when there is one

    @property
    def rate(self) -> float | None:
        return self.trend.slope if self.trend else None

    @property
    def rate_text(self) -> str:
        if self.trend is None:
            return "-"
        if is_flat(self.trend, self.line.values):
            return "flat"
        return format_rate(self.trend.slope, self.chart.unit)


@dataclass
class RunView:
    state: RunState
    charts: list[Chart]
    marks: list[Mark]
    report: Report | None
    report_source: str = SOURCE_NONE
    trends: dict[str, Trend] = field(default_factory=dict)  # the dashed lines to draw
    ooms: dict[str, OomProjection] = field(default_factory=dict)  # by line name
    holders: list[HolderGrowth] = field(default_factory=list)  # the biggest growers

    @property
    def verdict(self) -> str:
        if self.report is None:
            return "running" if self.state.running else "unknown"
        return self.report.verdict

    @property
    def findings(self) -> list[Finding]:
        return list(self.report.findings) if self.report else []

    def summaries(self) -> list[LineSummary]:
        judged = {s.name: s for s in (self.report.signals if self.report else [])}
        rows = []
        for chart in self.charts:
            for line in chart.lines:
                if line.primary or line.name in judged:
                    trend = self.trends.get(line.name) or fit_trend(line.steps, line.values)
                    rows.append(LineSummary(chart, line, trend, judged.get(line.name)))
        return rows


def finding_signal(finding: Finding) -> str:
    return finding.signal or _KIND_SIGNAL.get(finding.kind, "main_uss")


def build_view(run: str | Path, analyze: bool = True, allow_empty: bool = False) -> RunView:
    """Open ``run`` read-only and gather its signals, marks and findings."""
    path, conn = open_trace(run)
    try:
        state = read_state(path, conn)
        if state.steps == 0 and not allow_empty:
            raise BadInput(_empty_message(state))
        charts = load_charts(conn)
        marks = load_marks(conn)
        report, source = load_report(state, conn, analyze=analyze)
        charts[1:1] = _holder_charts(conn, report)
        holders = load_holder_growth(conn)
    finally:
        conn.close()
    view = RunView(state, charts, marks, report, source, holders=holders)
    _attach_trends(view)
    return view


def _holder_charts(conn: sqlite3.Connection, report: Report | None) -> list[Chart]:
    """One chart per finding's holder: the line going up, next to who holds it."""
    charts: list[Chart] = []
    for finding in report.findings if report else []:
        for name in (finding.holder_path, finding.culprit, finding.culprit.split(" (")[0]):
            chart = holder_chart(conn, name) if name else None
            if chart is not None:
                if all(c.key != chart.key for c in charts):
                    charts.append(chart)
                break
    return charts


def _empty_message(state: RunState) -> str:
    where = state.path.parent
    if state.running:
        return (f"run {where} has no steps recorded yet (still starting up): "
                f"watch it with `torchleak top {where}`, or try again in a moment")
    return (f"run {where} ({state.status}) recorded no training steps: torchleak counts a step "
            "at each optimizer.step(); did the script reach its training loop?")


def _attach_trends(view: RunView) -> None:
    lines = {ln.name: ln for chart in view.charts for ln in chart.lines}
    wanted: dict[str, float | None] = {}
    if view.report is not None:
        for signal in view.report.signals:
            if signal.verdict == "growing":
                wanted[signal.name] = signal.slope_per_step
        for finding in view.report.findings:
            name = _resolve(finding_signal(finding), lines)
            if name:
                wanted.setdefault(name, finding.bytes_per_step)
                if finding.oom is not None:
                    view.ooms.setdefault(name, finding.oom)
    for name, slope in wanted.items():
        line = lines.get(name)
        trend = fit_trend(line.steps, line.values, slope) if line else None
        if trend is not None:
            view.trends[name] = trend
    if view.report is None:
        for chart in view.charts:
            for line in chart.lines:
                trend = fit_trend(line.steps, line.values) if line.primary else None
                if looks_like_growth(trend, line.values):
                    view.trends[line.name] = trend  # type: ignore[assignment]


def _resolve(name: str, lines: dict[str, Line]) -> str | None:
    """Accept near-miss names: 'cuda_allocated' for device 0, 'uss' for main_uss."""
    for candidate in (name, f"main_{name}", name.replace("cuda0_", "cuda_")):
        if candidate in lines:
            return candidate
    return None
