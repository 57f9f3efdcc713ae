"""One self-contained HTML file: verdict banner, finding cards, one SVG chart per signal.

No script, font or style comes from the network: the file works offline and can be
attached to a bug report. jinja2 (the ``report`` extra) is imported only here.
"""

from __future__ import annotations

import time
from importlib import resources
from typing import Any

from torchleak.errors import UsageError
from torchleak.report import Finding
from torchleak.views.model import LineSummary, RunView
from torchleak.views.renderers.base import Renderer
from torchleak.views.renderers.details import finding_facts, holder_rows, metadata_rows, verdict_parts
from torchleak.views.renderers.svg import PALETTE, oom_step, render_chart
from torchleak.views.units import format_bytes, format_duration, format_value

_TEMPLATE = "report.html"


class HtmlRenderer(Renderer):
    extension = ".html"

    def render(self, view: RunView) -> str:
        try:
            import jinja2
        except ImportError:
            raise UsageError("the HTML report needs jinja2: pip install 'torchleak[report]'") from None
        source = resources.files("torchleak.views").joinpath("templates", _TEMPLATE).read_text("utf-8")
        env = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined,
                                 trim_blocks=True, lstrip_blocks=True)
        return env.from_string(source).render(**self.context(view, jinja2.utils.markupsafe.Markup))

    def context(self, view: RunView, markup: Any) -> dict[str, Any]:
        return {
            "title": f"torchleak: {view.state.name}",
            "run": view.state,
            "verdict": view.verdict,
            "verdict_title": verdict_parts(view)[0],
            "verdict_reason": verdict_parts(view)[1],
            "source": view.report_source,
            "stats": _stats(view),
            "findings": [_card(f) for f in view.findings],
            "charts": _charts(view, markup),
            "holders": holder_rows(view),
            "metadata": metadata_rows(view),
            "generated": time.strftime("%Y-%m-%d %H:%M:%S"),
        }


def _stats(view: RunView) -> list[tuple[str, str]]:
    meta = view.state.meta
    start, end = meta.get("start_time"), meta.get("end_time")
    stats = [("steps", f"{view.state.steps:,}"), ("status", view.state.status)]
    if isinstance(start, (int, float)):
        stop = end if isinstance(end, (int, float)) else time.time()
        stats.append(("duration", format_duration(stop - start)))
    peaks = {s.line.name: s.line.peak for s in view.summaries()}
    for name, label in (("main_uss", "peak main USS"), ("workers_uss", "peak workers USS"),
                        ("cuda_allocated", "peak CUDA allocated"), ("tensor_bytes", "peak tensor bytes")):
        if peaks.get(name) is not None:
            stats.append((label, format_bytes(peaks[name])))
    return stats


def _card(finding: Finding) -> dict[str, Any]:
    return {
        "culprit": finding.culprit,
        "kind": finding.kind.replace("_", " "),
        "severity": finding.severity,
        "facts": finding_facts(finding),
        "evidence": list(finding.evidence),
        "fix": finding.fix,
    }


def _charts(view: RunView, markup: Any) -> list[dict[str, Any]]:
    by_chart: dict[str, list[LineSummary]] = {}
    for summary in view.summaries():
        by_chart.setdefault(summary.chart.key, []).append(summary)
    charts = []
    for chart in view.charts:
        oom = next((view.ooms[ln.name] for ln in chart.lines if ln.name in view.ooms), None)
        last = max(s for ln in chart.lines if ln.plot for s in ln.steps)
        svg = render_chart(chart, view.marks, view.trends, oom)
        charts.append({
            "key": chart.key,
            "title": chart.title,
            "note": chart.note,
            "svg": markup(svg),
            "legend": [(ln.label, PALETTE[i % len(PALETTE)], ln.primary)
                       for i, ln in enumerate(ln for ln in chart.lines if ln.plot)],
            "rows": [_chart_row(s) for s in by_chart.get(chart.key, [])],
            "growing": any(ln.name in view.trends for ln in chart.lines if ln.plot),
            "oom_note": _oom_note(oom, last) if oom and not oom_step(oom, last) else "",
        })
    return charts


def _chart_row(summary: LineSummary) -> dict[str, str]:
    unit, line = summary.chart.unit, summary.line
    return {
        "label": line.label,
        "first": format_value(line.values[0] if line.values else None, unit),
        "last": format_value(line.last, unit),
        "peak": format_value(line.peak, unit),
        "rate": summary.rate_text,
        "verdict": summary.judged.verdict if summary.judged else "",
    }


def _oom_note(oom: Any, last: int) -> str:
    limit = f"{oom.limit_name} limit {format_bytes(oom.limit_bytes)}"
    if oom.steps_to_oom is None:
        return f"{limit}: not growing towards it"
    when = f", ~{format_duration(oom.seconds_to_oom)}" if oom.seconds_to_oom else ""
    return f"{limit}: projected OOM at step ~{last + oom.steps_to_oom:,.0f}{when} (beyond this chart)"
