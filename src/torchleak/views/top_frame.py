"""One frame of `torchleak top`: the numbers now, their sparklines, the current verdict."""

from __future__ import annotations

import time

from rich import box
from rich.console import Group, RenderableType
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from torchleak.views.live import BYTES_SIGNALS, History, LiveState
from torchleak.views.sparkline import sparkline
from torchleak.views.trend import fit_trend, is_flat, looks_like_growth
from torchleak.views.units import format_duration, format_rate, format_time, format_value

STATUS_STYLES = {"running": "bold green", "finished": "bold blue", "crashed": "bold red",
                 "killed": "bold red"}
LABELS = {"main_uss": "main USS", "main_rss": "main RSS", "workers_uss": "workers USS",
          "cuda_allocated": "CUDA allocated", "cuda_reserved": "CUDA reserved",
          "tensors": "live tensors", "tensor_bytes": "tensor bytes", "graph_bytes": "graph bytes"}


def render_frame(state: LiveState, interval: float) -> RenderableType:
    return Group(_header(state), _signals(state), _verdict(state), _footer(state, interval))


def _header(state: LiveState) -> Text:
    meta = state.meta
    name = meta.get("name") or state.path.parent.name
    text = Text(f"torchleak top  {name}", style="bold")
    text.append(f"  {meta.get('script') or ''}", style="dim")
    text.append("\n")
    text.append(state.status, style=STATUS_STYLES.get(state.status, "bold"))
    text.append(f"  step {state.step:,}")
    rate = state.steps_per_second
    if rate:
        text.append(f"  {rate:,.1f} steps/s")
    start = meta.get("start_time")
    if isinstance(start, (int, float)):
        end = meta.get("end_time") if state.status != "running" else None
        elapsed = (end if isinstance(end, (int, float)) else time.time()) - start
        text.append(f"  elapsed {format_duration(elapsed)}")
    return text


def _signals(state: LiveState) -> Table:
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False)
    for column, justify in (("signal", "left"), ("now", "right"), ("peak", "right"),
                            ("trend", "right"), ("recent", "left")):
        table.add_column(column, justify=justify, no_wrap=True)  # type: ignore[arg-type]
    for name, history in state.signals.items():
        if not history.values:
            continue
        unit = "bytes" if name in BYTES_SIGNALS else "count"
        label = LABELS.get(name, name)
        if name == "workers_uss" and state.workers:
            label = f"{label} ({state.workers})"
        table.add_row(label, format_value(history.values[-1], unit), format_value(history.peak, unit),
                      _trend_text(history, unit), Text(sparkline(list(history.values), 40), style="cyan"))
    if not state.signals or state.step == 0:
        table.add_row("waiting for the first training step...", "", "", "", "")
    return table


def _trend_text(history: History, unit: str) -> Text:
    trend = fit_trend(list(history.steps), list(history.values))
    if trend is None:
        return Text("-")
    if is_flat(trend, history.values):
        return Text("flat", style="green")
    growing = looks_like_growth(trend, list(history.values))
    return Text(format_rate(trend.slope, unit), style="red" if growing else "")


def _verdict(state: LiveState) -> Panel:
    final = state.final_verdict
    if state.findings:
        lines = [f"{f.severity.upper()} {f.kind}: {f.culprit}"
                 + (f" ({format_value(f.bytes_per_step, 'bytes', True)}/step)" if f.bytes_per_step else "")
                 for f in state.findings]
        head = Text("leak" if final in (None, "leak") else final, style="bold red")
        body = Text("\n".join(lines))
        return Panel(Group(head, body), title="verdict", title_align="left", border_style="red")
    if final:
        style = "green" if final == "no_leak" else "yellow"
        return Panel(Text(final, style=f"bold {style}"), title="verdict", title_align="left",
                     border_style=style)
    if state.status != "running":
        text = (f"run {state.status} at step {state.step:,}; no verdict recorded in the trace: "
                f"`torchleak report {state.path.parent}` analyses it")
        return Panel(Text(text), title="verdict", title_align="left", border_style="yellow")
    return Panel(Text(_watching(state)), title="verdict so far", title_align="left", border_style="dim")


def _watching(state: LiveState) -> str:
    history = state.signals.get("main_uss")
    if history is None or len(history.values) < 10:
        return "too early to tell: collecting steps"
    trend = fit_trend(list(history.steps), list(history.values))
    if looks_like_growth(trend, list(history.values)) and trend is not None:
        return (f"no finding yet; main USS climbing {format_rate(trend.slope, 'bytes')} over the "
                f"last {len(history.values)} steps (the analysis decides at the end)")
    return "no leak found so far"


def _footer(state: LiveState, interval: float) -> Text:
    text = Text()
    for event in state.events:
        text.append(f"{event}\n", style="yellow")
    if state.status == "running":
        text.append(f"updated {format_time(state.polled_at)[-8:]}, every {interval:g}s; Ctrl-C to quit",
                    style="dim")
    else:
        text.append(f"run {state.status}: final frame; `torchleak report {state.path.parent}` "
                    "for the full report", style="dim")
    return text
