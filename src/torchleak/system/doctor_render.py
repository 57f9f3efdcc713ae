"""``doctor``'s output: plain text (pipes, files: full lines, never cut), rich tables on a
terminal, or JSON."""

from __future__ import annotations

import json
from typing import TextIO

from torchleak.system.doctor_model import DoctorReport

PROPOSALS_TITLE = ("Proposed changes (ready to paste; they can change speed or results, so "
                   "they are yours to make):")


def _summary(report: DoctorReport, strict: bool) -> str:
    warns, fails = report.count("warn"), report.count("fail")
    code = report.exit_code(strict)
    tail = "" if strict or not warns else " (--strict makes warnings exit 1)"
    return (f"{len(report.checks)} checks: {report.count('ok')} ok, {warns} warning"
            f"{'s' if warns != 1 else ''}, {fails} failure{'s' if fails != 1 else ''}; "
            f"exit {code}{tail}")


def _diagnostic_lines(report: DoctorReport, path: str) -> list[str]:
    return [f"  {path}:{d['line']}:{d['col']}  {d['code']}  {d['message']}"
            for d in report.diagnostics]


def _proposal_lines(report: DoctorReport) -> list[str]:
    lines = []
    for number, p in enumerate(report.proposals, 1):
        lines += [f"  {number}. {p.where}", f"       {p.change}", f"     saves: {p.saving}",
                  f"     why:   {p.reason}"]
    return lines


def render_text(report: DoctorReport, strict: bool = False) -> str:
    lines = [f"torchleak doctor: {_summary(report, strict)}", ""]
    for check in report.checks:
        lines.append(f"{check.status:5} {check.name}: {check.value}")
        lines.append(f"{'':5} why: {check.why}")
        if check.fix:
            lines.append(f"{'':5} fix: {check.fix}")
    if report.diagnostics and report.script:
        lines += ["", f"Static check of {report.script['path']}:"]
        lines += _diagnostic_lines(report, report.script["path"])
    if report.proposals:
        lines += ["", PROPOSALS_TITLE, *_proposal_lines(report)]
    return "\n".join(lines) + "\n"


def render_json(report: DoctorReport, strict: bool = False) -> str:
    return json.dumps(report.to_dict(strict), indent=2, default=str) + "\n"


_STYLE = {"ok": "green", "warn": "yellow", "fail": "bold red"}


def render_rich(report: DoctorReport, stream: TextIO, strict: bool = False) -> None:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    console = Console(file=stream, highlight=False)
    table = Table(title=f"torchleak doctor: {_summary(report, strict)}", title_justify="left",
                  show_lines=True, expand=True)
    table.add_column("", no_wrap=True)
    table.add_column("check", overflow="fold", ratio=2)
    table.add_column("measured", overflow="fold", ratio=3)
    table.add_column("why / what to change", overflow="fold", ratio=5)
    for check in report.checks:
        advice = Text(check.why)
        if check.fix:
            advice.append("\nfix: ", style="bold").append(check.fix)
        table.add_row(Text(check.status, style=_STYLE[check.status]), Text(check.name),
                      Text(check.value), advice)
    console.print(table)
    if report.diagnostics and report.script:
        console.print(Text(f"\nStatic check of {report.script['path']}:", style="bold"))
        for line in _diagnostic_lines(report, report.script["path"]):
            console.print(Text(line), overflow="fold")
    if report.proposals:
        console.print(Text("\n" + PROPOSALS_TITLE, style="bold"))
        for line in _proposal_lines(report):
            console.print(Text(line), overflow="fold")
