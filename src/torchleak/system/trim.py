"""Give glibc's heap slack back while training runs, on a time budget, off the hot path.

A training loop that keeps a tiny tensor per step (``losses.append(loss.detach())``)
makes glibc's heap grow by the size of the step's large blocks: each tiny live chunk
sits between freed blocks, so the heap cannot shrink and the next step's blocks go
further up. The freed chunks stay resident. ``malloc_trim(0)`` returns their pages to
the system (the chunks stay free and are reused later), so the process stays flat
without changing a single allocation the program sees.

``trim_if_slack(state)`` trims when the heap's free bytes (``mallinfo2``, a few µs) grew
by ``grow_bytes`` since the last trim: the heap extended past holes pinned by live
objects. The free figure swings within every step (activations come and go), so the
lowest of the last ``window`` readings is compared: a healthy loop never trims. At most
once per ``min_interval_s``, and only while trimming takes less than ``budget_share``
of the wall time (counting the trim and the page faults that bring reused pages back). Trimming leaves the chunks free (only their pages go back), so the
free figure does not drop; the next trim waits for new growth on top of it. Call it
every 0.1-1 s from a thread other than the training thread (``SlackTrimmer`` does).
"""

from __future__ import annotations

import math
import threading
import time
from collections import deque
from dataclasses import dataclass, field

from torchleak.system.allocator import heap_stats, malloc_trim
from torchleak.system.procmem import rss_now

DEFAULT_GROW_BYTES = 8 << 20
DEFAULT_INTERVAL_S = 0.1
# Trimmed pages that are used again fault back in (and are zeroed): the budget counts
# the pages that came back by the next reading at this rate, so trimming a working set
# that is still in use is paid for, not just the call.
REFAULT_BYTES_PER_S = 2 << 30


@dataclass
class SlackState:
    """The trimming decision's memory between calls (one per process)."""

    grow_bytes: int = DEFAULT_GROW_BYTES
    min_interval_s: float = 0.2
    budget_share: float = 0.05  # trimming may take at most this share of the wall time
    window: int = 5  # readings whose lowest free figure is compared
    started: float = field(default_factory=time.monotonic)
    recent: deque[int] = field(default_factory=deque, repr=False)
    reference: int | None = None  # the lowest free figure at the last trim (or first look)
    last_trim: float = -math.inf
    last_cost_s: float = 0.0
    spent_s: float = 0.0
    trims: int = 0
    released: int = 0  # resident bytes the trims gave back, summed
    unsettled: tuple[int, int] | None = None  # (released, rss after) of the last trim

    def to_dict(self) -> dict[str, float | int | None]:
        return {"trims": self.trims, "released": self.released,
                "spent_s": round(self.spent_s, 6), "grow_bytes": self.grow_bytes}

    def settled_free(self, free: int) -> int:
        """The lowest free figure of the last ``window`` readings, this one included."""
        self.recent.append(free)
        while len(self.recent) > max(1, self.window):
            self.recent.popleft()
        return min(self.recent)


def _within_budget(state: SlackState, now: float) -> bool:
    if now - state.last_trim < state.min_interval_s:
        return False
    allowed = state.budget_share * (now - state.started)
    return state.spent_s + state.last_cost_s <= allowed


def _count_refaults(state: SlackState) -> None:
    """Charge the budget for the trimmed pages that were used again since the last trim."""
    if state.unsettled is None:
        return
    released, rss_after = state.unsettled
    state.unsettled = None
    back = min(released, max(0, (rss_now() or rss_after) - rss_after))
    state.spent_s += back / REFAULT_BYTES_PER_S


def trim_if_slack(state: SlackState) -> int | None:
    """Trim glibc's heap when its free bytes grew by ``state.grow_bytes``; the resident
    bytes released (>= 0), or None when it did not trim (no growth, over budget, or no
    glibc ``mallinfo2`` here)."""
    heap = heap_stats()
    if heap is None:
        return None
    _count_refaults(state)
    free = state.settled_free(heap.free)
    if state.reference is None:
        state.reference = free
        return None
    now = time.monotonic()
    if free - state.reference < state.grow_bytes or not _within_budget(state, now):
        return None
    rss_before = rss_now()
    malloc_trim(0)
    rss_after = rss_now()
    released = max(0, (rss_before or 0) - (rss_after or 0))
    cost = time.monotonic() - now
    state.unsettled = (released, rss_after or 0) if rss_after is not None else None
    state.reference = free
    state.last_trim, state.last_cost_s = now, cost
    state.spent_s += cost
    state.trims += 1
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
