"""``attach --cleanup`` and ``torchleak.cleanup()`` under a monitor: free what the process
can free (``torchleak.system.cleanup``), and when that frees nothing, say who holds the
memory with a holder walk at the caller's frame."""

from __future__ import annotations

from types import FrameType
from typing import Any

from torchleak.record.session import Recorder
from torchleak.system.cleanup import CleanupResult, cleanup
from torchleak.units import format_bytes

SHOWN = 3  # holders named when nothing was freed


def holders_text(recorder: Recorder | None, frame: FrameType | None) -> str | None:
    """'held by: global history in train.py (312 MiB), ...': the largest holders now."""
    if recorder is None or not recorder.torch_attached:
        return None
    samples = recorder.walk_now(frame)
    largest = sorted(samples, key=lambda s: s.bytes, reverse=True)[:SHOWN]
    if not largest:
        return None
    names = [f"{s.detail.get('label') or s.holder} ({format_bytes(s.bytes)})" for s in largest]
    return "held by: " + ", ".join(names)


def cleanup_here(recorder: Recorder | None, frame: FrameType | None,
                 verbose: bool = True) -> CleanupResult:
    return cleanup(verbose=verbose, explain=lambda: holders_text(recorder, frame))


def cleanup_in_process(recorder: Recorder | None, frame: FrameType | None) -> dict[str, Any]:
    """{'steps': [...], 'freed': bytes, 'text': lines to show, 'summary': one line}."""
    result = cleanup_here(recorder, frame, verbose=False)
    return {"steps": [step.to_dict() for step in result.steps], "freed": result.freed_bytes,
            "text": str(result), "summary": f"freed {format_bytes(result.freed_bytes)}"}
