"""Open file descriptors and threads: handles that pile up (files opened per step and
never closed, a DataLoader's shared-memory descriptors, a thread started per call) end
in "Too many open files" or a process that cannot start a thread, long before memory
runs out. Counted from ``/proc/self/fd`` and ``/proc/self/task`` (~20-60 us)."""

from __future__ import annotations

import os
import time

from torchleak.record.probe import Cost, Probe, ProbeContext, register
from torchleak.trace import tables


def _count(folder: str) -> int | None:
    try:
        return len(os.listdir(folder))
    except OSError:  # not Linux, or /proc hidden
        return None


@register
class OpenFiles(Probe):
    name = "open_files"
    tables = (tables.OPEN_FILES,)
    cost = Cost(share=0.03, expected_seconds=5e-5, min_gap_steps=10)

    def run(self, ctx: ProbeContext) -> None:
        fds, threads = _count("/proc/self/fd"), _count("/proc/self/task")
        if fds is None and threads is None:
            raise OSError("/proc/self is not readable here")
        ctx.emit(tables.OPEN_FILES, tables.OPEN_FILES.row(
            step=ctx.step, t=time.time(), fds=fds, threads=threads))
