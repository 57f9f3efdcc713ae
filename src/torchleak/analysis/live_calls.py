"""Live and final agree, or say why not: each leak the live detector called, kept or
withdrawn by the analysis of the whole run, with the reason in one line."""

from __future__ import annotations

from typing import Any

from torchleak.analysis.holders import display_name, short_name
from torchleak.analysis.series import HolderSeries, RunData
from torchleak.report import Report
from torchleak.units import format_bytes, number

TIERS = ("none", "suspected", "called")


def live_outcome(data: RunData, report: Report) -> dict[str, Any] | None:
    """``{"tier", "calls": [{"step", "culprit", "kept", "why"}]}`` from what the live
    detector wrote into the trace, judged against ``report``; None when it never ran."""
    live = data.live
    if live is None:
        return None
    tier = live.tier if live.tier in TIERS else "none"
    calls = []
    for call in live.calls:
        target = _target(call)
        kept = _kept(report, target)
        step = int(number(call.get("step")) or 0)
        culprit = str(call.get("culprit") or "")
        why = str(call.get("why") or "")
        if not kept:
            why = f"the warning at step {step:,} was withdrawn: {_withdrawn(data, target)}"
        calls.append({"step": step, "culprit": culprit, "kept": kept, "why": why})
    return {"tier": tier, "calls": calls}


def _target(call: dict[str, Any]) -> str:
    """The holder path or signal a call names (a trace from before calls carried their
    ``target`` has only the ``kind:target`` key)."""
    if call.get("target"):
        return str(call["target"])
    key = str(call.get("key") or "")
    return key.split(":", 1)[1] if ":" in key else key


def _kept(report: Report, target: str) -> bool:
    """The end keeps a call on the same holder, or on the same signal: growth the live
    detector could not name yet is kept when the end names who holds it."""
    return any(target in (f.holder_path, f.signal) for f in report.serious)


def _withdrawn(data: RunData, target: str) -> str:
    holder = data.holders.get(target)
    if holder is not None and holder.length:
        return _holder_reason(holder)
    series = data.memory.get(target)
    if series:
        peak = max(series.y)
        at = next(x for x, y in zip(series.x, series.y) if y >= 0.97 * peak)
        return (f"{target} stopped growing at step {at:.0f} and held {format_bytes(peak)}: "
                "growth that levelled off (warm-up, a cache or buffer that filled once)")
    return "the whole run does not show it growing without bound"


def _holder_reason(holder: HolderSeries) -> str:
    name = f"`{short_name(holder)}`"
    lengths, steps = list(holder.length), list(holder.steps)
    top = max(lengths)
    peak_at = steps[lengths.index(top)]
    if lengths[-1] < 0.5 * top:
        return (f"{name} was emptied at step {_emptied_at(steps, lengths, top):.0f} after "
                f"holding {top:,.0f} items (released, not leaked)")
    held = format_bytes(max(holder.bytes)) if any(holder.bytes) else f"{top:,.0f} items"
    return (f"{name} stopped growing at step {peak_at:.0f} and held {held}: a cache or "
            f"buffer that filled once ({display_name(holder)})")


def _emptied_at(steps: list[float], lengths: list[float], top: float) -> float:
    seen_top = False
    for step, length in zip(steps, lengths):
        seen_top = seen_top or length >= top
        if seen_top and length < 0.5 * top:
            return step
    return steps[-1]


def withdrawn(report: Report) -> list[dict[str, Any]]:
    live = report.live or {}
    return [c for c in live.get("calls", []) if not c.get("kept")]

