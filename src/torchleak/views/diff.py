"""How ``torchleak diff`` shows two runs: the change in one line, then side by side."""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

from torchleak.analysis.diff import CategoryChange, HolderChange, RunDiff, Side
from torchleak.units import format_bytes, format_rate
from torchleak.views.inert import inert_input
from torchleak.views.renderers.details import SIGNAL_NAMES, VERDICT_TITLES, step_cost
from torchleak.views.tabular import format_table

SHORT = {"main_uss": "main USS", "workers_uss": "workers USS",
         "cuda_allocated": "CUDA allocated", "cuda_reserved_unused": "CUDA reserved unused"}


@inert_input
def summary_line(diff: RunDiff) -> str:
    """'`epoch_logits` gone; main USS slope 118 KiB/step -> 0.2 KiB/step; peak -310 MiB'."""
    parts = [f"`{h.name}` gone" for h in diff.gone]
    parts += [f"`{h.name}` appeared" for h in diff.appeared]
    if diff.a.verdict != diff.b.verdict:
        parts.append(f"verdict {_verdict(diff.a)} -> {_verdict(diff.b)}")
    for change in diff.signals:
        if change.signal == "main_uss" or change.growth_a or change.growth_b:
            parts.append(f"{SHORT.get(change.signal, change.signal)} slope "
                         f"{_slope(change.a_slope)} -> {_slope(change.b_slope)}")
    if diff.peak_delta is not None:
        parts.append(f"peak {format_bytes(diff.peak_delta, signed=True)}")
    return "; ".join(parts) or "no change in what torchleak measures"


def _slope(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{format_bytes(abs(value))}/step" if value >= 0 else (
        f"{format_bytes(value)}/step")


def _verdict(side: Side) -> str:
    text = VERDICT_TITLES.get(side.verdict, side.verdict).lower()
    return text + (f" ({side.findings})" if side.verdict == "leak" and side.findings else "")


@inert_input
def diff_text(diff: RunDiff) -> str:
    a, b = diff.a, diff.b
    lines = [f"torchleak diff: A {a.name} ({a.status}, {a.steps:,} steps) -> "
             f"B {b.name} ({b.status}, {b.steps:,} steps)", f"change: {summary_line(diff)}", ""]
    rows: list[list[Any]] = [["verdict", _verdict(a), _verdict(b), ""],
                             ["steps", f"{a.steps:,}", f"{b.steps:,}", ""]]
    for change in diff.signals:
        label = SIGNAL_NAMES.get(change.signal, change.signal)
        rows.append([f"{label} slope", _rate(change.a_slope, change.a_verdict),
                     _rate(change.b_slope, change.b_verdict), ""])
        rows.append([f"{label} peak", format_bytes(change.a_peak), format_bytes(change.b_peak),
                     _delta(change.a_peak, change.b_peak)])
    rows.append(["step time (median)", _ms(a.step_ms), _ms(b.step_ms), _pct(a.step_ms,
                                                                          b.step_ms)])
    rows.append(["torchleak's cost", _cost(a.overhead), _cost(b.overhead), ""])
    lines.append(format_table(["", "A", "B", "change"], rows).rstrip("\n"))
    lines += ["", *_holder_lines(diff)]
    if diff.categories:
        lines += ["", "where the memory goes (last census of each run)",
                  format_table(["category", "A", "B", "change", "A per step", "B per step"],
                               [_category_row(c) for c in diff.categories]).rstrip("\n")]
    lines += ["", _worse_line(diff)]
    return "\n".join(lines) + "\n"


def _cost(overhead: dict[str, Any]) -> str:
    """'0.0207 ms per step (1.5% of a step)': the full sentence is in each run's report."""
    ms, share = overhead.get("ms_per_step"), overhead.get("share")
    if ms is None or share is None:
        return "-"
    return step_cost(ms, share) + ")" + (", over budget" if overhead.get("over_budget") else "")


def _holder_lines(diff: RunDiff) -> list[str]:
    def line(h: HolderChange, rate: float | None) -> str:
        where = f", {h.category}" if h.category else ""
        return f"  {h.name}: {h.culprit} ({format_rate(rate, 'bytes')}{where})"

    lines = ["holders that went away:" + ("" if diff.gone else " none")]
    lines += [line(h, h.a_rate) for h in diff.gone]
    lines.append("holders that appeared:" + ("" if diff.appeared else " none"))
    lines += [line(h, h.b_rate) for h in diff.appeared]
    if diff.kept:
        lines.append("holders in both:")
        lines += [f"  {h.name}: {format_rate(h.a_rate, 'bytes')} -> "
                  f"{format_rate(h.b_rate, 'bytes')}" for h in diff.kept]
    return lines


def _category_row(c: CategoryChange) -> list[str]:
    return [c.category, _at(c.a_last, c.a_step), _at(c.b_last, c.b_step),
            format_bytes(c.delta, signed=True), format_rate(c.a_rate, "bytes"),
            format_rate(c.b_rate, "bytes")]


def _at(value: float | None, step: int | None) -> str:
    return "-" if value is None else f"{format_bytes(value)} at step {step:,}"


def _rate(slope: float | None, verdict: str | None) -> str:
    if slope is None:
        return "-"
    text = format_rate(slope, "bytes")
    words = {"healthy": "below threshold", "plateau": "levels off"}
    return text if verdict == "growing" else f"{text} ({words.get(verdict or '', verdict)})"


def _delta(a: float | None, b: float | None) -> str:
    return "" if a is None or b is None else format_bytes(b - a, signed=True)


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.3g} ms"


def _pct(a: float | None, b: float | None) -> str:
    return "" if not a or b is None else f"{100 * (b - a) / a:+.0f}%"


def _worse_line(diff: RunDiff) -> str:
    limits = diff.thresholds
    rule = (f"(worse: B leaks where A did not, grows faster by > {limits.rate_share:.0%}, or "
            f"peaks higher by > {limits.peak_share:.0%})")
    if diff.worse:
        return f"B is worse than A: {'; '.join(diff.reasons)} {rule}"
    return f"B is not worse than A {rule}"


def diff_json(diff: RunDiff) -> str:
    data = asdict(diff)
    data["summary"] = summary_line(diff)
    data["peak_delta"] = diff.peak_delta
    for change, row in zip(diff.categories, data["categories"]):
        row["delta"] = change.delta
    return json.dumps(data, indent=2, default=str) + "\n"
