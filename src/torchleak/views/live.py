"""What torchleak prints while the run is alive: a leak warning and a guard notice."""

from __future__ import annotations

from typing import Any

from torchleak.report import Report
from torchleak.units import format_bytes, format_duration
from torchleak.views.inert import inert_input
from torchleak.views.summary import finding_lines


@inert_input
def format_warning(report: Report, again: bool = False) -> str:
    """One compact block: the holder, the measured rate, the time to the limit, the source
    line and the fix, for the top finding (and a count of the others)."""
    serious = report.called
    word = "still leaking" if again else "leak detected"
    lines = [f"torchleak: {word} at step {report.steps:,} (training goes on; the guard acts "
             "near the limit)"]
    lines += finding_lines(serious[0])
    if len(serious) > 1:
        lines.append(f"  and {len(serious) - 1} more: "
                     + ", ".join(f.holder_path or f.signal for f in serious[1:4]))
    return "\n".join(lines)


@inert_input
def format_guard(event: Any) -> str:
    when = (f", limit projected in ~{format_duration(event.seconds_to_limit)}"
            if event.seconds_to_limit is not None else "")
    action = {"warn": "taking a diagnosis snapshot",
              "checkpoint": "taking a snapshot and calling your on_guard checkpoint",
              "stop": "taking a snapshot, calling your on_guard checkpoint, then stopping "
                      "the training at the next step"}.get(event.mode, event.mode)
    return (f"torchleak: GUARD at step {event.step:,}: memory {format_bytes(event.memory_bytes)}"
            f" of {event.limit_name} {format_bytes(event.limit_bytes)}{when}; {action}")
