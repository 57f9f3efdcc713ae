"""The thresholds that decide severity and warm-up (documented in docs/detection.md)."""

from __future__ import annotations

KIB = 1024.0
MIB = 1024.0 * 1024.0
HIGH_BYTES_PER_STEP = 16 * KIB
MEDIUM_BYTES_PER_STEP = 2 * KIB


def warmup_steps(steps: int) -> float:
    """Healthy growth happens early (optimizer state, caches, allocator warm-up): ignore
    the first 10% of the run (3 to 50 steps)."""
    return max(3.0, min(50.0, 0.1 * steps))
