"""Shared constants and formatting for the analysis."""

from __future__ import annotations

from torchleak.analysis.series import RunData

KIB = 1024.0
MIB = 1024.0 * 1024.0
HIGH_BYTES_PER_STEP = 16 * KIB
MEDIUM_BYTES_PER_STEP = 2 * KIB


def warmup_steps(steps: int) -> float:
    """Healthy growth happens early (H3, H4): ignore the first 10% (3 to 50 steps)."""
    return max(3.0, min(50.0, 0.1 * steps))


def fmt_bytes(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if abs(n) < 1024 or unit == "GB":
            return f"{n:.3g} {unit}" if unit != "B" else f"{n:.0f} B"
        n /= 1024.0
    return f"{n:.3g} GB"


def current(data: RunData, signal: str) -> float:
    series = data.memory.get(signal)
    return series.y[-1] if series and series.y else 0.0
