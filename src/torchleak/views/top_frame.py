"""One frame of `torchleak top`: the numbers now, their sparklines, the live verdict."""

from __future__ import annotations

import time
from pathlib import Path

from rich import box
from rich.console import Group, RenderableType
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from torchleak.report import Finding, Report
from torchleak.units import format_duration, format_time, format_value
from torchleak.views.inert import inert_input
from torchleak.views.renderers.details import guard_text, signal_last, signal_rate, status_of
from torchleak.views.sparkline import sparkline
from torchleak.views.summary import finding_lines

STATUS_STYLES = {"running": "bold green", "finished": "bold blue", "crashed": "bold red",
                 "killed": "bold red", "stopped": "bold yellow"}


@inert_input
def render_frame(report: Report, interval: float, polled_at: float) -> RenderableType:
    if report.job:
        return Text(frame_text(report, interval, polled_at).rstrip("\n"))
    return Group(_header(report), _signals(report), _verdict(report),
                 _footer(report, interval, polled_at))


def _header(report: Report) -> Text:
    run = report.run
    status = status_of(report)
    text = Text(f"torchleak top  {run.get('name') or ''}", style="bold")
    text.append(f"  {run.get('script') or ''}", style="dim")
    text.append("\n")
    text.append(status, style=STATUS_STYLES.get(status, "bold"))
    text.append(f"  step {report.steps:,}")
    start = run.get("start_time")
    if isinstance(start, (int, float)):
        end = run.get("end_time") if status != "running" else None
        elapsed = (end if isinstance(end, (int, float)) else time.time()) - start
        text.append(f"  elapsed {format_duration(elapsed)}")
    if report.overhead:
        text.append(f"  torchleak {100 * float(report.overhead.get('share', 0)):.2g}% of a step",
                    style="dim")
    return text


def _signals(report: Report) -> Table:
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False)
    for column, justify in (("signal", "left"), ("now", "right"), ("peak", "right"),
                            ("trend", "right"), ("recent", "left")):
        table.add_column(column, justify=justify, no_wrap=True)  # type: ignore[arg-type]
    for signal in report.signals:
        if signal.values:
            table.add_row(signal.label or signal.name, signal_last(signal, report.steps),
                          format_value(signal.peak_value, signal.unit),
                          Text(signal_rate(signal),
                               style="red" if signal.verdict == "growing" else ""),
                          Text(sparkline(signal.values, 40), style="cyan"))
    if not report.signals or report.steps == 0:
        table.add_row("waiting for the first training step...", "", "", "", "")
    return table


def _shown(report: Report) -> list[Finding]:
    """The serious findings, called ones first: a live report also holds suspects."""
    return sorted(report.serious, key=lambda f: report.source == "live" and not f.called)


def _verdict(report: Report) -> Panel:
    live = report.source == "live"
    title = "live verdict" if live else "verdict"
    guard = guard_text(report.guard)
    shown = _shown(report)
    if shown and report.verdict != "leak":
        body = Text("suspected, not called yet (growth warm-up could still explain)",
                    style="bold yellow")
        for finding in shown[:3]:
            body.append("\n" + "\n".join(finding_lines(finding, indent="")))
        return Panel(body, title=title, title_align="left", border_style="yellow")
    if shown:
        body = Text(f"leak{' (live detection)' if live else ''}", style="bold red")
        for finding in shown[:3]:
            body.append("\n" + "\n".join(finding_lines(finding, indent="")))
        if guard:
            body.append(f"\n{guard}", style="bold red")
        return Panel(body, title=title, title_align="left", border_style="red")
    if not report.run.get("judged"):
        text = ("collecting steps: no verdict yet" if status_of(report) == "running" else
                f"run {status_of(report)} at step {report.steps:,}; `torchleak report "
                f"{report.run.get('trace', '')}` analyses it")
        return Panel(Text(text), title=title, title_align="left", border_style="dim")
    style = "green" if report.verdict == "no_leak" else "yellow"
    text = f"{report.verdict}{': ' + report.reason if report.reason else ''}"
    return Panel(Text(text, style=style), title=title, title_align="left", border_style=style)


def _footer(report: Report, interval: float, polled_at: float) -> Text:
    text = Text()
    for event in report.events:
        text.append(f"step {event.step}: {event.kind} {event.source}: {event.message}\n",
                    style="yellow")
    if status_of(report) == "running":
        text.append(f"updated {format_time(polled_at)[-8:]}, every {interval:g}s; Ctrl-C to quit",
                    style="dim")
    else:
        text.append(f"run {status_of(report)}: final frame; `torchleak report "
                    f"{report.run.get('trace', '')}` for the full report", style="dim")
    return text


@inert_input
def frame_text(report: Report, interval: float, polled_at: float) -> str:
    """The same frame as plain text, every value in full (``top --once`` into a pipe)."""
    from torchleak.views.tabular import format_table

    if report.job:
        return job_frame_text(report, interval, polled_at)
    lines = [_header(report).plain, ""]
    rows = [[s.label or s.name, signal_last(s, report.steps),
             format_value(s.peak_value, s.unit), signal_rate(s), sparkline(s.values, 40)]
            for s in report.signals if s.values]
    lines.append(format_table(["signal", "now", "peak", "trend", "recent"], rows).rstrip())
    lines.append("")
    label = "live verdict" if report.source == "live" else "verdict"
    shown = _shown(report)
    if shown and report.verdict != "leak":
        lines.append(f"{label}: suspected, not called yet - {report.reason}")
        for finding in shown[:3]:
            lines.extend(finding_lines(finding, indent=""))
    elif shown:
        lines.append(f"{label}: leak - {report.reason}" if report.reason else f"{label}: leak")
        for finding in shown[:3]:
            lines.extend(finding_lines(finding, indent=""))
    elif report.run.get("judged"):
        lines.append(f"{label}: {report.verdict}{' - ' + report.reason if report.reason else ''}")
    else:
        lines.append(f"{label}: no verdict yet")
    guard = guard_text(report.guard)
    if guard:
        lines.append(guard)
    lines.append(_footer(report, interval, polled_at).plain.rstrip())
    return "\n".join(lines) + "\n"


def job_frame_text(report: Report, interval: float, polled_at: float) -> str:
    """A job of many ranks in one frame: ranks by status, the leaking ones one row each,
    the rest counted, and the worst rank's live finding in full."""
    from torchleak.views.renderers.details import job_lines, rank_rows
    from torchleak.views.tabular import format_table

    lines = [f"torchleak top  {report.run.get('name') or ''}  {report.run.get('script') or ''}",
             f"{status_of(report)}  step {report.steps:,} (the furthest rank)", ""]
    lines += [line for line in job_lines(report) if not line.startswith("one rank in full")]
    label = "live verdict" if report.source == "live" else "verdict"
    if report.ranks:
        rows = [[r["rank"], r["status"], r["steps"], r["growth"], r["top"], r["source"]]
                for r in rank_rows(report)]
        lines += ["", format_table(["leaking rank", "status", "steps", "growth", "top finding",
                                    "judged"], rows).rstrip()]
        lines += ["", f"{label}: leak - {report.reason}"]
        for finding in report.serious[:1]:
            lines.extend(finding_lines(finding, indent=""))
    elif report.run.get("judged"):
        lines += ["", f"{label}: {report.verdict} - {report.reason}"]
    else:
        lines += ["", f"{label}: no verdict yet"]
    folder = report.run.get("trace", "")
    folder = str(Path(str(folder)).parent.parent) if folder else ""
    lines.append(f"follow one rank: torchleak top {folder} --rank N")
    if status_of(report) == "running":
        lines.append(f"updated {format_time(polled_at)[-8:]}, every {interval:g}s; Ctrl-C to quit")
    else:
        lines.append(f"job {status_of(report)}: final frame; `torchleak report {folder}` for the "
                     "full report")
    return "\n".join(lines) + "\n"
