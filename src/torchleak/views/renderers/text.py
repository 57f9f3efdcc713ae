"""The terminal summary: verdict, one sparkline per signal, the findings (rich)."""

from __future__ import annotations

import io

from rich import box
from rich.console import Console, Group, RenderableType
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from torchleak.report import Finding
from torchleak.views.model import RunView
from torchleak.views.renderers.base import Renderer
from torchleak.views.renderers.details import finding_facts, holder_rows, metadata_rows, verdict_parts
from torchleak.views.sparkline import sparkline
from torchleak.views.units import format_value

VERDICT_STYLES = {"leak": "bold red", "no_leak": "bold green", "inconclusive": "bold yellow"}
SEVERITY_STYLES = {"high": "red", "medium": "yellow", "low": "dim"}


class TextRenderer(Renderer):
    extension = ".txt"

    def __init__(self, color: bool = False, width: int = 100) -> None:
        self.color = color
        self.width = width

    def render(self, view: RunView) -> str:
        buffer = io.StringIO()
        console = Console(file=buffer, width=self.width, force_terminal=self.color,
                          color_system="truecolor" if self.color else None, highlight=False)
        # The sparkline takes what the numbers leave of the width.
        console.print(summary_renderable(view, spark_width=max(12, min(40, self.width - 62))))
        return buffer.getvalue()


def summary_renderable(view: RunView, spark_width: int = 32) -> RenderableType:
    parts: list[RenderableType] = [verdict_panel(view), signal_table(view, spark_width)]
    parts += [finding_panel(f) for f in view.findings]
    if view.holders:
        parts.append(holder_table(view))
    parts.append(_run_line(view))
    return Group(*parts)


def verdict_panel(view: RunView) -> Panel:
    title, reason = verdict_parts(view)
    style = VERDICT_STYLES.get(view.verdict, "bold")
    body = Text(title, style=style)
    if reason:
        body.append(f"\n{reason}", style="default")
    header = f"torchleak: {view.state.name} ({view.state.status}, {view.state.steps:,} steps)"
    return Panel(body, title=header, title_align="left", border_style=style.split()[-1])


def signal_table(view: RunView, spark_width: int = 32) -> Table:
    table = Table(title="memory over steps", title_justify="left", box=box.SIMPLE_HEAD,
                  pad_edge=False)
    for column, justify in (("signal", "left"), ("last", "right"), ("peak", "right"),
                            ("trend", "right"), ("", "left")):
        table.add_column(column, justify=justify, no_wrap=True)  # type: ignore[arg-type]
    for row in view.summaries():
        unit, line = row.chart.unit, row.line
        growing = line.name in view.trends
        rate = Text(row.rate_text, style="red" if growing else "")
        table.add_row(f"{line.name}", format_value(line.last, unit), format_value(line.peak, unit),
                      rate, Text(sparkline(line.values, spark_width), style="cyan"))
    return table


def holder_table(view: RunView) -> Table:
    table = Table(title="holders that grew", title_justify="left", box=box.SIMPLE_HEAD,
                  pad_edge=False)
    for column in ("holder", "kind", "length", "retained", "steps"):
        table.add_column(column, no_wrap=column != "holder")
    for row in holder_rows(view):
        table.add_row(row["holder"], row["kind"], row["length"], row["bytes"], row["steps"])
    return table


def finding_panel(finding: Finding) -> Panel:
    style = SEVERITY_STYLES.get(finding.severity, "")
    body = Text()
    for key, value in finding_facts(finding):
        body.append(f"{key:>12}  ", style="dim")
        body.append(f"{value}\n")
    for item in finding.evidence:
        body.append(f"  - {item}\n")
    if finding.fix:
        body.append("fix: ", style="bold green")
        body.append(finding.fix)
    body.rstrip()
    title = f"{finding.severity.upper()} {finding.kind}: {finding.culprit}"
    return Panel(body, title=title, title_align="left", border_style=style or "white")


def _run_line(view: RunView) -> Text:
    rows = dict(metadata_rows(view))
    bits = [rows.get("script", ""), f"trace {rows['trace']}", f"findings: {rows['findings']}"]
    return Text(" | ".join(b for b in bits if b), style="dim")
