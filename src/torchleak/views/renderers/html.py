"""One self-contained HTML file: verdict banner, finding cards, one SVG chart per signal.

No script, font or style comes from the network: the file works offline and can be
attached to a bug report. jinja2 (the ``report`` extra) is imported only here.
"""

from __future__ import annotations

import time
from importlib import resources
from typing import Any

from torchleak.errors import UsageError
from torchleak.report import Finding, Report, Signal
from torchleak.units import format_bytes, format_duration, format_value
from torchleak.views.renderers.base import Renderer
from torchleak.views.renderers.breakdown import breakdown_rows, stacked_charts
from torchleak.views.renderers.details import (finding_facts, guard_text, holder_rows,
                                               job_lines, metadata_rows, rank_rows, signal_last,
                                               signal_rate, status_of, verdict_parts)
from torchleak.views.renderers.svg import PALETTE, oom_step, render_chart

_TEMPLATE = "report.html"


class HtmlRenderer(Renderer):
    extension = ".html"

    def render(self, report: Report) -> str:
        try:
            import jinja2
        except ImportError:
            raise UsageError("the HTML report needs jinja2: pip install 'torchleak[report]'") from None
        source = resources.files("torchleak.views").joinpath("templates", _TEMPLATE).read_text("utf-8")
        env = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined,
                                 trim_blocks=True, lstrip_blocks=True)
        return env.from_string(source).render(**self.context(report, jinja2.utils.markupsafe.Markup))

    def context(self, report: Report, markup: Any) -> dict[str, Any]:
        title, reason = verdict_parts(report)
        return {
            "title": f"torchleak: {report.run.get('name') or 'run'}",
            "name": report.run.get("name") or "run",
            "subtitle": f"{report.run.get('script') or ''} · {status_of(report)}",
            "verdict": report.verdict,
            "verdict_title": title,
            "verdict_reason": reason,
            "guard": guard_text(report.guard),
            "source": report.source,
            "stats": _stats(report),
            "findings": [_card(f) for f in report.findings],
            "charts": _charts(report, markup),
            "holders": holder_rows(report),
            "ranks": rank_rows(report),
            "job": job_lines(report),
            "breakdown": [{"title": title, "svg": markup(svg), "legend": legend}
                          for title, svg, legend in stacked_charts(report)],
            "breakdown_rows": breakdown_rows(report),
            "metadata": metadata_rows(report),
            "generated": time.strftime("%Y-%m-%d %H:%M:%S"),
        }


def _stats(report: Report) -> list[tuple[str, str]]:
    run = report.run
    start, end = run.get("start_time"), run.get("end_time")
    stats = [("steps", f"{report.steps:,}"), ("status", status_of(report))]
    if isinstance(start, (int, float)):
        stop = end if isinstance(end, (int, float)) else time.time()
        stats.append(("duration", format_duration(stop - start)))
    for name, label in (("main_uss", "peak main USS"), ("workers_uss", "peak workers USS"),
                        ("cuda_allocated", "peak CUDA allocated"),
                        ("tensor_bytes", "peak tensor bytes")):
        signal = report.signal(name)
        if signal is not None and signal.peak_value is not None:
            stats.append((label, format_bytes(signal.peak_value)))
    if report.overhead:
        stats.append(("torchleak's cost", f"{100 * float(report.overhead.get('share', 0)):.2g}% "
                                          "of a step"))
        if report.overhead.get("memory_bytes") is not None:
            stats.append(("torchleak's memory", format_bytes(report.overhead["memory_bytes"])))
    return stats


def _card(finding: Finding) -> dict[str, Any]:
    return {
        "culprit": finding.culprit,
        "kind": finding.kind.replace("_", " "),
        "severity": finding.severity,
        "facts": finding_facts(finding),
        "evidence": list(finding.evidence),
        "fix": finding.fix,
        "anchor": finding.pattern or "",
    }


def _charts(report: Report, markup: Any) -> list[dict[str, Any]]:
    groups: dict[str, list[Signal]] = {}
    for signal in report.signals:
        groups.setdefault(signal.chart or signal.name, []).append(signal)
    ooms = {f.signal: f.oom for f in report.serious if f.oom is not None}
    charts = []
    for key, signals in groups.items():
        plotted = [s for s in signals if s.plot and s.steps]
        if not plotted:
            continue
        unit = plotted[0].unit
        oom = next((ooms[s.name] for s in signals if s.name in ooms), None)
        last = int(max(x for s in plotted for x in s.steps))
        charts.append({
            "key": key,
            "title": signals[0].chart_title or key,
            "note": "",
            "svg": markup(render_chart(signals[0].chart_title or key, unit, plotted,
                                       report.marks, oom)),
            "legend": [(s.label or s.name, PALETTE[i % len(PALETTE)], s.primary)
                       for i, s in enumerate(plotted)],
            "rows": [_chart_row(s, report.steps) for s in signals],
            "growing": any(s.fit is not None for s in plotted),
            "oom_note": _oom_note(oom, last) if oom and not oom_step(oom, last) else "",
        })
    return charts


def _chart_row(signal: Signal, steps: int) -> dict[str, str]:
    return {
        "label": signal.label or signal.name,
        "first": format_value(signal.start_value, signal.unit),
        "last": signal_last(signal, steps),
        "peak": format_value(signal.peak_value, signal.unit),
        "rate": signal_rate(signal),
        "verdict": signal.verdict,
    }


def _oom_note(oom: Any, last: int) -> str:
    limit = f"{oom.limit_name} limit {format_bytes(oom.limit_bytes)}"
    if oom.steps_to_oom is None:
        return f"{limit}: not growing towards it"
    when = f", ~{format_duration(oom.seconds_to_oom)}" if oom.seconds_to_oom else ""
    return f"{limit}: projected OOM at step ~{last + oom.steps_to_oom:,.0f}{when} (beyond this chart)"
