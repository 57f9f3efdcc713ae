"""Where a recording writes, and what happens when one of its parts fails.

Every row, event and metadata value of a recording goes through one ``Outbox`` (the trace
writer behind it). Every probe, the CUDA watch and the recorder's own boundary run their
work through ``safely``: the first failure switches that part off and leaves an event in
the trace, never an exception in the program's training.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from torchleak.trace.tables import Table
from torchleak.trace.writer import TraceWriter

if TYPE_CHECKING:
    from torchleak.record.probes.heap import HeapSample


class Outbox:
    def __init__(self, writer: TraceWriter, current_step: Callable[[], int]) -> None:
        self.writer = writer
        self._current_step = current_step  # an event's step
        # The parts switched off after a failure (probe names, "recorder", "trace"): the
        # probe plan reads this same set.
        self.off: set[str] = set()

    # rows, events, metadata ----------------------------------------------------------------
    def emit(self, table: Table, row: Sequence[Any]) -> None:
        """One row of a declared table (a probe's ``ctx.emit``)."""
        self.writer.add(table.name, row)

    def add_rows(self, table: str, rows: list[tuple[Any, ...]]) -> None:
        for row in rows:
            self.writer.add(table, row)

    def event(self, kind: str, source: str, message: str) -> None:
        self.writer.add("events", (time.time(), self._current_step(), kind, source, message))

    def set_meta(self, key: str, value: Any) -> None:
        self.writer.set_meta(key, value)

    def process_sample(self, step: int, t: float, pid: int, role: str, rss: int, uss: int,
                       pss: int) -> None:
        """The child sampler's reading of one process."""
        self.writer.add("process_samples", (step, t, pid, role, rss, uss, pss))

    def heap_sample(self, step: int, t: float, sample: HeapSample) -> None:
        """The child sampler's split of the heap."""
        self.writer.add("heap_samples", (step, t, sample.py_blocks, sample.malloc_in_use,
                                         sample.malloc_free, sample.malloc_mmapped))

    # failures ------------------------------------------------------------------------------
    def allowed(self, part: str) -> bool:
        return part not in self.off

    def safely(self, part: str, action: Callable[[], None]) -> None:
        """Run ``action``; its first failure switches ``part`` off (reported), never raises."""
        try:
            action()
        except Exception as err:  # noqa: BLE001 - a failing probe is switched off, not raised
            self.disable(part, err)

    def disable(self, part: str, err: BaseException) -> None:
        if part not in self.off:
            self.off.add(part)
            self.event("probe_disabled", part, f"{type(err).__name__}: {err}")
