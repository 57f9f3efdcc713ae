"""The terminal report: verdict, one sparkline per signal, the findings.

Plain lines and aligned tables, coloured when the output is a terminal. Nothing is ever
cut to fit the width: piped into a file or ``cat``, every value is printed in full.
"""

from __future__ import annotations

import io

from rich.console import Console
from rich.text import Text

from torchleak.report import Finding, Report
from torchleak.units import format_value
from torchleak.views.inert import inert_input
from torchleak.views.renderers.base import Renderer
from torchleak.views.renderers.breakdown import breakdown_rows
from torchleak.views.renderers.details import (finding_facts, guard_text, holder_rows,
                                               job_lines, live_text, metadata_rows, rank_rows,
                                               signal_last,
                                               signal_rate, status_of, verdict_parts)
from torchleak.views.sparkline import sparkline
from torchleak.views.tabular import format_table

VERDICT_STYLES = {"leak": "bold red", "no_leak": "bold green", "inconclusive": "bold yellow"}
SEVERITY_STYLES = {"high": "bold red", "medium": "bold yellow", "low": "dim"}


class TextRenderer(Renderer):
    extension = ".txt"

    def __init__(self, color: bool = False, width: int = 100) -> None:
        self.color = color
        self.width = width

    def render(self, report: Report) -> str:
        buffer = io.StringIO()
        console = Console(file=buffer, width=max(self.width, 40), force_terminal=self.color,
                          color_system="truecolor" if self.color else None, highlight=False,
                          soft_wrap=True)
        spark = max(12, min(40, self.width - 70))
        for part in report_lines(report, spark):
            console.print(part)
        return buffer.getvalue()


@inert_input
def report_lines(report: Report, spark_width: int = 32) -> list[Text]:
    title, reason = verdict_parts(report)
    name = report.run.get("name") or "run"
    lines = [Text(f"torchleak: {name} ({status_of(report)}, {report.steps:,} steps)",
                  style="bold"),
             Text(title, style=VERDICT_STYLES.get(report.verdict, "bold"))]
    if reason:
        lines.append(Text(reason))
    guard = guard_text(report.guard)
    if guard:
        lines.append(Text(guard, style="bold red"))
    lines += [Text(line, style="yellow") for line in live_text(report)]
    lines += [Text(f"--safe: {value}", style="dim") for key, value in metadata_rows(report)
              if key == "--safe"]
    if report.job:
        lines += [Text(""), Text("ranks", style="bold"), *map(Text, job_lines(report))]
    if report.ranks:
        lines += [Text(""), Text("leaking ranks", style="bold"), Text(_rank_table(report))]
    lines += [Text(""), Text("memory over steps", style="bold"), Text(_signal_table(report,
                                                                                  spark_width))]
    if report.breakdown:
        lines += [Text(""), Text("where the memory goes (measured at each census)", style="bold"),
                  Text(_breakdown_table(report))]
    for finding in report.findings:
        lines += [Text(""), *finding_lines(finding)]
    if report.holders:
        lines += [Text(""), Text("holders that grew", style="bold"), Text(_holder_table(report))]
    lines += [Text(""), Text(_run_line(report), style="dim")]
    return lines


def _signal_table(report: Report, spark_width: int) -> str:
    rows = []
    for signal in report.signals:
        if signal.name.startswith("holder:"):
            continue
        rows.append([signal.label or signal.name, signal_last(signal, report.steps),
                     format_value(signal.peak_value, signal.unit), signal_rate(signal),
                     sparkline(signal.values, spark_width)])
    return format_table(["signal", "last", "peak", "trend", ""], rows).rstrip("\n")


def _rank_table(report: Report) -> str:
    rows = [[r["rank"], r["status"], r["steps"], r["growth"], r["top"], r["source"]]
            for r in rank_rows(report)]
    return format_table(["rank", "status", "steps", "growth", "top finding", "judged"],
                        rows).rstrip("\n")


def _breakdown_table(report: Report) -> str:
    rows = [[r["category"], r["first"], r["last"], r["rate"], r["meaning"]]
            for r in breakdown_rows(report)]
    return format_table(["category", "first", "last", "per step", "what it is"],
                        rows).rstrip("\n")


def _holder_table(report: Report) -> str:
    rows = [[r["holder"], r["kind"], r["length"], r["bytes"], r["steps"]]
            for r in holder_rows(report)]
    return format_table(["holder", "kind", "length", "own size", "steps"], rows).rstrip("\n")


@inert_input
def finding_lines(finding: Finding) -> list[Text]:
    head = Text(f"{finding.severity.upper()} ", style=SEVERITY_STYLES.get(finding.severity, ""))
    head.append(f"{finding.kind}: {finding.culprit}", style="bold")
    lines = [head]
    for key, value in finding_facts(finding):
        line = Text(f"{key:>18}  ", style="dim")
        line.append(value)
        lines.append(line)
    lines += [Text(f"  - {item}") for item in finding.evidence]
    if finding.fix:
        fix = Text("  fix: ", style="bold green")
        fix.append(finding.fix)
        lines.append(fix)
    return lines


def _run_line(report: Report) -> str:
    rows = dict(metadata_rows(report))
    bits = [rows.get("script", ""), f"trace {rows.get('trace', '-')}",
            "torchleak's cost: " + rows.get("torchleak's cost", "-")]
    return " | ".join(b for b in bits if b)
