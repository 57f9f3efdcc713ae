"""Hand-built inline SVG charts: no script, no external URL, a few KB per chart.

A chart is one signal family over steps: its lines, the epoch/validation marks, the
fitted line (dashed) on the series it was fitted to, over the steps it was fitted on,
and, when the Report projects one, the OOM limit and step. Points carry ``<title>``
values, so hovering shows them without any script.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from html import escape

from torchleak.report import Fit, Mark, OomProjection, Signal
from torchleak.units import format_count, format_duration, format_rate, format_value

WIDTH, HEIGHT = 880, 270
LEFT, RIGHT, TOP, BOTTOM = 74, 24, 22, 36
PALETTE = ("#2563eb", "#059669", "#d97706", "#7c3aed", "#db2777", "#0891b2", "#65a30d", "#9333ea")
OOM_SHOWN_WITHIN = 3.0  # draw the projection when OOM is within 3x the recorded steps


@dataclass
class Frame:
    """Data space to pixel space."""

    x0: float
    x1: float
    y0: float
    y1: float

    def x(self, step: float) -> float:
        return LEFT + (step - self.x0) / ((self.x1 - self.x0) or 1) * (WIDTH - LEFT - RIGHT)

    def y(self, value: float) -> float:
        return HEIGHT - BOTTOM - (value - self.y0) / ((self.y1 - self.y0) or 1) * (HEIGHT - TOP - BOTTOM)


def oom_step(oom: OomProjection | None, last_step: int) -> float | None:
    """The projected OOM step when it is close enough to draw, else None."""
    if oom is None or oom.steps_to_oom is None or oom.steps_to_oom <= 0:
        return None
    step = last_step + oom.steps_to_oom
    return step if step <= OOM_SHOWN_WITHIN * max(last_step, 1) else None


HOVER_POINTS = 120  # points per series that carry a hover title


def render_chart(title: str, unit: str, signals: list[Signal], marks: list[Mark],
                 oom: OomProjection | None = None) -> str:
    plotted = [s for s in signals if s.plot and s.steps]
    steps = [x for s in plotted for x in s.steps]
    values = [v for s in plotted for v in s.values]
    last = max(steps)
    projected = oom_step(oom, int(last))
    x1 = projected * 1.04 if projected else last
    y_hi = max([*values, oom.limit_bytes] if (projected and oom) else values)
    frame = _frame(min(steps), x1, min(values), y_hi)
    parts = [_axes(frame, unit), _marks(frame, marks)]
    for i, signal in enumerate(plotted):
        color = PALETTE[i % len(PALETTE)]
        parts.append(_polyline(frame, signal.steps, signal.values, color, signal.primary))
        parts.append(_hover(frame, signal, unit))
        if signal.fit is not None:
            parts.append(_trend(frame, signal.fit, unit))
    if projected and oom:
        parts.append(_oom(frame, oom, projected))
    label = escape(title)
    return (f'<svg class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-label="{label}" '
            f'preserveAspectRatio="xMidYMid meet">{"".join(parts)}</svg>')


def _hover(frame: Frame, signal: Signal, unit: str) -> str:
    """Invisible points with a title each: the value under the mouse, no script."""
    n = len(signal.steps)
    every = max(1, math.ceil(n / HOVER_POINTS))
    out = ['<g class="hover">']
    for i in range(0, n, every):
        step, value = signal.steps[i], signal.values[i]
        out.append(f'<circle cx="{frame.x(step):.1f}" cy="{frame.y(value):.1f}" r="4">'
                   f'<title>{escape(signal.label or signal.name)}: '
                   f'{escape(format_value(value, unit))} at step {format_count(step)}'
                   f'</title></circle>')
    out.append("</g>")
    return "".join(out)


def _frame(x0: float, x1: float, y0: float, y1: float) -> Frame:
    if x1 <= x0:
        x1 = x0 + 1
    pad = (y1 - y0) * 0.08 or max(abs(y1) * 0.05, 1.0)
    low = max(0.0, y0 - pad) if y0 >= 0 else y0 - pad
    return Frame(x0, x1, low, y1 + pad)


def nice_ticks(low: float, high: float, count: int = 5) -> list[float]:
    """Round tick values: 1, 2, 2.5 or 5 times a power of ten."""
    return [v for v, _ in labelled_ticks(low, high, "count", count)]


def labelled_ticks(low: float, high: float, unit: str, count: int = 5) -> list[tuple[float, str]]:
    """Ticks and their labels; bytes tick at round numbers of the unit that fits (MiB, GiB)."""
    scale, suffix = _byte_scale(max(abs(low), abs(high))) if unit == "bytes" else (1.0, "")
    lo, hi = low / scale, high / scale
    if hi <= lo:
        return [(low, _tick_label(lo, 0, suffix))]
    raw = (hi - lo) / count
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= raw)
    if scale == 1.0:
        step = max(step, 1.0)  # no 0.2 bytes, no 0.5 tensors
    decimals = max(0, -math.floor(math.log10(step) + 1e-9))
    if step / power == 2.5 and power <= 1:
        decimals += 1
    first = math.ceil(lo / step) * step
    n = int((hi - first) / step + 1e-9) + 1
    return [((first + i * step) * scale, _tick_label(first + i * step, decimals, suffix))
            for i in range(n)]


def _byte_scale(level: float) -> tuple[float, str]:
    scale, suffix = 1.0, " B"
    for name in (" KiB", " MiB", " GiB", " TiB"):
        if level < scale * 1024:
            break
        scale, suffix = scale * 1024, name
    return scale, suffix


def _tick_label(value: float, decimals: int, suffix: str) -> str:
    text = f"{value:,.{decimals}f}" if decimals else f"{round(value):,}"
    return text + suffix


def _axes(frame: Frame, unit: str) -> str:
    out = [f'<rect class="plot" x="{LEFT}" y="{TOP}" width="{WIDTH - LEFT - RIGHT}" '
           f'height="{HEIGHT - TOP - BOTTOM}"/>']
    for value, text in labelled_ticks(frame.y0, frame.y1, unit):
        y = frame.y(value)
        out.append(f'<line class="grid" x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{y:.1f}" y2="{y:.1f}"/>'
                   f'<text class="tick" x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">'
                   f'{escape(text)}</text>')
    for step in nice_ticks(frame.x0, frame.x1, 8):
        if step != int(step):
            continue
        x = frame.x(step)
        out.append(f'<line class="xtick" x1="{x:.1f}" x2="{x:.1f}" y1="{HEIGHT - BOTTOM}" '
                   f'y2="{HEIGHT - BOTTOM + 4}"/><text class="tick" x="{x:.1f}" '
                   f'y="{HEIGHT - BOTTOM + 16}" text-anchor="middle">{format_count(step)}</text>')
    out.append(f'<text class="axis-label" x="{(LEFT + WIDTH - RIGHT) / 2:.0f}" y="{HEIGHT - 3}" '
               f'text-anchor="middle">step</text>')
    return "".join(out)


def _marks(frame: Frame, marks: list[Mark]) -> str:
    out = []
    open_validation: int | None = None
    verticals = sum(1 for m in marks if not m.name.startswith("validation"))
    every = max(1, math.ceil(verticals / 10))  # at most ~10 labels, or they overlap
    shown = 0
    for mark in marks:
        if mark.name == "validation_start":
            open_validation = mark.step
        elif mark.name == "validation_end" and open_validation is not None:
            x0, x1 = frame.x(open_validation), frame.x(mark.step)
            out.append(f'<rect class="validation" x="{x0:.1f}" y="{TOP}" width="{max(x1 - x0, 2):.1f}" '
                       f'height="{HEIGHT - TOP - BOTTOM}"><title>validation after step '
                       f'{open_validation}</title></rect>')
            open_validation = None
        elif mark.name != "validation_end":
            out.append(_vertical(frame, mark, label=shown % every == 0))
            shown += 1
    if open_validation is not None:
        out.append(_vertical(frame, Mark(open_validation, "validation")))
    return "".join(out)


def _vertical(frame: Frame, mark: Mark, label: bool = True) -> str:
    x = frame.x(mark.step)
    text = mark.name if mark.value in (None, "", "null") else f"{mark.name} {mark.value}"
    css = "epoch" if mark.name == "epoch" else "mark"
    near_right = x > WIDTH - RIGHT - 60
    anchor = 'text-anchor="end" ' if near_right else ""
    line = (f'<line class="{css}" x1="{x:.1f}" x2="{x:.1f}" y1="{TOP}" y2="{HEIGHT - BOTTOM}">'
            f'<title>{escape(text)} (step {mark.step})</title></line>')
    if not label:
        return line
    return (line + f'<text class="mark-label" {anchor}x="{x - 3 if near_right else x + 3:.1f}" '
            f'y="{TOP - 6}">{escape(text)}</text>')


def _polyline(frame: Frame, steps: list[float], values: list[float], color: str,
              primary: bool) -> str:
    if not steps:
        return ""
    xs, ys = steps, values
    points = " ".join(f"{frame.x(s):.1f},{frame.y(v):.1f}" for s, v in zip(xs, ys))
    css = "series" if primary else "series secondary"
    if len(xs) == 1:
        return (f'<circle class="{css}" cx="{frame.x(xs[0]):.1f}" cy="{frame.y(ys[0]):.1f}" '
                f'r="3" fill="{color}"/>')
    return f'<polyline class="{css}" stroke="{color}" points="{points}"/>'


def _trend(frame: Frame, fit: Fit, unit: str) -> str:
    x_start, x_end = fit.first_step, fit.last_step
    y_start, y_end = fit.at(x_start), fit.at(x_end)
    label = f"fitted line {format_rate(fit.slope, unit)}"
    return (f'<line class="trend" x1="{frame.x(x_start):.1f}" y1="{frame.y(y_start):.1f}" '
            f'x2="{frame.x(x_end):.1f}" y2="{frame.y(y_end):.1f}"><title>{escape(label)}</title></line>'
            f'<text class="trend-label" x="{WIDTH - RIGHT - 6}" y="{HEIGHT - BOTTOM - 8}" '
            f'text-anchor="end">{escape(label)}</text>')


def _oom(frame: Frame, oom: OomProjection, step: float) -> str:
    y, x = frame.y(oom.limit_bytes), frame.x(step)
    when = f" (~{format_duration(oom.seconds_to_oom)})" if oom.seconds_to_oom else ""
    label = (f"{oom.limit_name} limit {format_value(oom.limit_bytes, 'bytes')}: "
             f"projected OOM at step ~{format_count(round(step))}{when}")
    return (f'<line class="oom" x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{y:.1f}" y2="{y:.1f}"/>'
            f'<circle class="oom-point" cx="{x:.1f}" cy="{y:.1f}" r="5"/>'
            f'<text class="oom-label" x="{LEFT + 6}" y="{y - 6:.1f}">{escape(label)}</text>')
