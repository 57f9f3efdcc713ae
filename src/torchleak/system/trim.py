"""Give glibc's heap slack back while training runs, on a time budget, off the hot path.

A training loop that keeps a tiny tensor per step (``losses.append(loss.detach())``)
makes glibc's heap grow by the size of the step's large blocks: each tiny live chunk
sits between freed blocks, so the heap cannot shrink and the next step's blocks go
further up. The freed chunks stay resident. ``malloc_trim(0)`` returns their pages to
the system (the chunks stay free and are reused later), so the process stays flat
without changing a single allocation the program sees.

``trim_if_slack(state)`` trims when, since the last trim, the heap's free bytes grew by
``grow_bytes`` (``mallinfo2``, a few µs: the heap extended past pinned holes) or the
resident size grew by ``grow_bytes`` more than the bytes malloc hands out (trimmed
holes touched again and freed again), at most once per ``min_interval_s`` and only
while trimming takes less than ``budget_share`` of the wall time. Call it from a thread
other than the training thread (``SlackTrimmer`` is one).
"""

from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass, field

from torchleak.system.allocator import HeapStats, heap_stats, malloc_trim
from torchleak.system.procmem import rss_now

DEFAULT_GROW_BYTES = 8 << 20
DEFAULT_INTERVAL_S = 0.1


@dataclass
class SlackState:
    """The trimming decision's memory between calls (one per process)."""

    grow_bytes: int = DEFAULT_GROW_BYTES
    min_interval_s: float = 0.2
    budget_share: float = 0.01  # trimming may take at most this share of the wall time
    started: float = field(default_factory=time.monotonic)
    reference: int | None = None  # the heap's free bytes after the last trim (or first look)
    reference_rss: int = 0  # resident bytes then
    reference_used: int = 0  # bytes malloc handed out then (heap and mmapped)
    last_trim: float = -math.inf
    last_cost_s: float = 0.0
    spent_s: float = 0.0
    trims: int = 0
    released: int = 0  # resident bytes the trims gave back, summed

    def to_dict(self) -> dict[str, float | int | None]:
        return {"trims": self.trims, "released": self.released,
                "spent_s": round(self.spent_s, 6), "grow_bytes": self.grow_bytes}


def _within_budget(state: SlackState, now: float) -> bool:
    if now - state.last_trim < state.min_interval_s:
        return False
    allowed = state.budget_share * (now - state.started)
    return state.spent_s + state.last_cost_s <= allowed


def _slack_grew(state: SlackState, heap: HeapStats, rss: int | None) -> bool:
    if heap.free - (state.reference or 0) >= state.grow_bytes:
        return True
    if rss is None:
        return False
    used = heap.in_use + heap.mmapped
    return (rss - state.reference_rss) - (used - state.reference_used) >= state.grow_bytes


def _set_reference(state: SlackState, heap: HeapStats, rss: int | None) -> None:
    # Trimming leaves the chunks free (only their pages go), so the free figure stays:
    # the next trim waits for new growth on top of it.
    state.reference = max(state.reference or 0, heap.free)
    state.reference_rss = rss or 0
    state.reference_used = heap.in_use + heap.mmapped


def trim_if_slack(state: SlackState) -> int | None:
    """Trim glibc's heap when its slack grew by ``state.grow_bytes``; the resident bytes
    released (>= 0), or None when it did not trim (no growth, over budget, or no glibc
    ``mallinfo2`` here)."""
    heap = heap_stats()
    if heap is None:
        return None
    rss = rss_now()
    if state.reference is None:
        _set_reference(state, heap, rss)
        return None
    now = time.monotonic()
    if not _slack_grew(state, heap, rss) or not _within_budget(state, now):
        return None
    malloc_trim(0)
    rss_after = rss_now()
    cost = time.monotonic() - now
    _set_reference(state, heap_stats() or heap, rss_after)
    state.last_trim, state.last_cost_s = now, cost
    state.spent_s += cost
    state.trims += 1
    released = max(0, (rss or 0) - (rss_after or 0))
    state.released += released
    return released


class SlackTrimmer:
    """A daemon thread calling ``trim_if_slack`` every ``interval_s``; ``stop()`` ends it.

    Threads do not survive ``fork``: DataLoader workers start without it.
    """

    def __init__(self, state: SlackState | None = None,
                 interval_s: float = DEFAULT_INTERVAL_S) -> None:
        self.state = state or SlackState()
        self.interval_s = interval_s
        self.error: str | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="torchleak-trim", daemon=True)

    def start(self) -> SlackTrimmer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout=1.0)

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                trim_if_slack(self.state)
            except Exception as err:  # noqa: BLE001 - switch off, never disturb the run
                self.error = f"{type(err).__name__}: {err}"
                return
