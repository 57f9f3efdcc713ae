"""Where the memory goes: the category table (text and HTML) and the stacked chart (an
inline SVG like the other charts: no script, values on hover through ``<title>``).

Points are censuses; between two censuses a category keeps the value last measured, so
the chart is drawn as steps, never interpolated. A negative ``allocator_slack`` (two
readings a moment apart that disagree) is drawn at zero; its hover says the value.
"""

from __future__ import annotations

import math
from html import escape

from torchleak.report import Report
from torchleak.units import format_bytes, format_count, format_rate
from torchleak.views.renderers.svg import HEIGHT, WIDTH, Frame, _axes

TOTALS = ("total", "cuda_total")
MEANINGS = {
    "parameters": "nn.Parameter storages",
    "gradients": "the parameters' .grad",
    "optimizer_state": "tensors in optimizer.state",
    "autograd_saved": "tensors kept by live autograd graphs",
    "other_tensors": "every other tensor: batches, outputs, caches",
    "python_objects": "non-tensor heap: Python objects and native libraries",
    "allocator_slack": "process memory nothing above explains: freed memory kept",
    "workers": "DataLoader workers' USS",
    "cuda_cache": "CUDA reserved but unallocated (PyTorch's cache)",
    "cuda_other": "device memory outside PyTorch's allocator",
}
COLORS = {
    "parameters": "#2563eb", "gradients": "#7c3aed", "optimizer_state": "#db2777",
    "autograd_saved": "#dc2626", "other_tensors": "#d97706", "python_objects": "#059669",
    "allocator_slack": "#94a3b8", "workers": "#0891b2", "cuda_cache": "#a3a3a3",
    "cuda_other": "#525252",
}
MAX_COLUMNS = 200  # census intervals drawn (and hovered) per chart


def meaning(category: str) -> str:
    base = category.removeprefix("cuda_")
    text = MEANINGS.get(category) or MEANINGS.get(base, "")
    return f"{text} (on the GPU)" if category.startswith("cuda_") and category not in (
        "cuda_cache", "cuda_other") else text


def breakdown_rows(report: Report) -> list[dict[str, str]]:
    """One row per category: first and last census, and the growth per step."""
    rows = []
    for name, points in report.breakdown.items():
        if not points:
            continue
        rate = report.breakdown_rates.get(name)
        rows.append({
            "category": name, "meaning": meaning(name) if name not in TOTALS else (
                "main USS + workers' USS" if name == "total" else "device memory in use"),
            "first": _at(points[0]), "last": _at(points[-1]),
            "rate": format_rate(rate, "bytes") if rate is not None else "-",
        })
    return rows


def _at(point: list[float]) -> str:
    return f"{format_bytes(point[1])} at step {format_count(point[0])}"


def stacked_charts(report: Report) -> list[tuple[str, str, list[tuple[str, str]]]]:
    """(title, svg, legend) for the host split and, when recorded, the CUDA split."""
    charts = []
    for title, names in (("Process memory by category (main USS + workers)",
                          [n for n in report.breakdown if not n.startswith("cuda_")
                           and n not in TOTALS]),
                         ("CUDA memory by category, device in use",
                          [n for n in report.breakdown if n.startswith("cuda_")
                           and n not in TOTALS])):
        if names and any(len(report.breakdown[n]) for n in names):
            charts.append((title, stacked_svg(title, report, names),
                           [(n, color_of(n)) for n in names]))
    return charts


def color_of(name: str) -> str:
    return COLORS.get(name) or COLORS.get(name.removeprefix("cuda_"), "#64748b")


def stacked_svg(title: str, report: Report, names: list[str]) -> str:
    steps = sorted({p[0] for n in names for p in report.breakdown[n]})
    every = max(1, math.ceil(len(steps) / MAX_COLUMNS))
    columns = steps[::every]
    values = {n: _carried(report.breakdown[n], columns) for n in names}
    tops = [sum(max(0.0, values[n][i]) for n in names) for i in range(len(columns))]
    end = max(columns[-1] + 1, report.steps)
    frame = Frame(columns[0], end, 0.0, max(tops) * 1.08 or 1.0)
    parts = [_axes(frame, "bytes")]
    for i, step in enumerate(columns):
        right = columns[i + 1] if i + 1 < len(columns) else end
        base = 0.0
        for name in names:
            value = values[name][i]
            height = max(0.0, value)
            y0, y1 = frame.y(base), frame.y(base + height)
            x0, x1 = frame.x(step), frame.x(right)
            parts.append(f'<rect x="{x0:.1f}" y="{y1:.1f}" width="{max(x1 - x0, 0.6):.1f}" '
                         f'height="{max(y0 - y1, 0.0):.1f}" fill="{color_of(name)}">'
                         f'<title>{escape(name)}: {escape(format_bytes(value))} measured at '
                         f'step {format_count(step)}</title></rect>')
            base += height
    return (f'<svg class="stacked" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" '
            f'aria-label="{escape(title)}" preserveAspectRatio="xMidYMid meet">'
            f'{"".join(parts)}</svg>')


def _carried(points: list[list[float]], columns: list[float]) -> list[float]:
    """The value last measured at or before each column (0 before the first)."""
    out, i, last = [], 0, 0.0
    for step in columns:
        while i < len(points) and points[i][0] <= step:
            last = float(points[i][1])
            i += 1
        out.append(last)
    return out
