"""The CUDA side of a recording: the allocator's counters once the program itself uses
CUDA, and the allocator's history once a CUDA finding is called.

Whether the program has initialised CUDA is asked every ``CHECK_EVERY`` steps until it
has (the question costs ~15 us: too dear for every step of a CPU run). Never initialises
CUDA itself.

A read of the counters is followed by at least ``READ_SHARE`` times its own time without
one (at most ``READ_GAP_MAX``): a read costs ~65 us in place on an H100's host (the allocator
builds ~200 Python objects for it; a step's own code then runs slower after it, ~2x that
again), so a 2 ms step read at every boundary paid ~10%. Steps slower than ~200 reads are
read at every boundary; a fast loop every few steps (each read's values are exact
counters, so fewer points lose nothing a straight line needs). A boundary that runs a probe
always reads (the census splits the latest reading).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from time import perf_counter
from typing import Any, Protocol

from torchleak.record.probes.cuda import CudaProbe, cuda_in_use, device_names
from torchleak.record.schedule import NEVER
from torchleak.record.probes.cuda_history import CudaHistory

CHECK_EVERY = 64
# A read is followed by at least READ_SHARE times its own time without one (~0.5%).
READ_SHARE = 200
# ...and never more than this between reads (a read slowed once by the machine's load).
READ_GAP_MAX = 0.05


class CudaHost(Protocol):
    """What the watch needs of the recording (its ``Outbox``)."""

    def allowed(self, probe: str) -> bool: ...

    def safely(self, probe: str, action: Callable[[], None]) -> None: ...

    def set_meta(self, key: str, value: Any) -> None: ...

    def event(self, kind: str, source: str, message: str) -> None: ...

    def add_rows(self, table: str, rows: list[tuple[Any, ...]]) -> None: ...


class CudaWatch:
    def __init__(self, host: CudaHost, folder: Path) -> None:
        self._host = host
        self._probe = CudaProbe()
        self.history = CudaHistory(folder)
        self.live = False  # the program uses CUDA and the probe works
        # The first step and time at which ``at_boundary`` has something to do: the
        # recorder compares, so a CPU run's boundaries make no call here.
        self.next_step = 1
        self.next_time = 0.0

    def at_boundary(self, step: int, now: float) -> None:
        """Sample the allocator (from ``next_step`` and ``next_time`` on, or at a probe's
        boundary). ``now``: the boundary's ``time.perf_counter()``."""
        if not self.live:
            self.next_step = step + CHECK_EVERY
            if not self._started():
                return
        self.next_step = step + 1
        host = self._host
        host.safely("cuda", lambda: host.add_rows("cuda_samples",
                                                  self._probe.sample(step, now)))
        if not host.allowed("cuda"):  # the counters failed: switched off, never asked again
            self.live = False
            self.next_step = NEVER
            return
        if self.history.due(step):
            host.safely("cuda_history", self.save_history)
        took = perf_counter() - now
        self.next_time = now + min(READ_GAP_MAX, took * (READ_SHARE + 1))

    def _started(self) -> bool:
        self.live = self._host.allowed("cuda") and cuda_in_use()
        if self.live:
            self._host.safely("cuda_devices",
                              lambda: self._host.set_meta("gpu_totals", device_names()))
        return self.live

    @property
    def latest(self) -> dict[int, tuple[int, ...]] | None:
        """The latest per-device reading, while CUDA is recorded."""
        return self._probe.latest if self._host.allowed("cuda") else None

    def start_history(self, step: int) -> None:
        if self.live and self._host.allowed("cuda_history"):
            self._host.safely("cuda_history", lambda: self.history.start(step))

    def save_history(self) -> None:
        if not self.history.recording:
            return
        path = self.history.save()
        if path is not None:
            self._host.set_meta("cuda_snapshot", str(path))
            self._host.event("cuda_snapshot", "cuda", f"allocator history saved to {path}")
