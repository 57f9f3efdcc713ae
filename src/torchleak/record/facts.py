"""What a probe may read about the recording and note for it (``ProbeContext.facts``).

The readings are the recorder's own (the process's memory, the workers' at the sampler's
latest sweep, the CUDA allocator's latest counters), so a probe never measures again what
a boundary or a thread has just measured; the notes are what the end of the run reports
(torchleak's own memory, the latest census for framework loggers).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from torchleak.record.outbox import Outbox
from torchleak.record.probes.process import ChildSampler, MainMemoryProbe


class CudaReadings(Protocol):
    """What the facts read of the CUDA watch (``cuda_watch.CudaWatch``)."""

    @property
    def latest(self) -> dict[int, tuple[int, ...]] | None: ...


class RecordingFacts:
    def __init__(self, outbox: Outbox, main: MainMemoryProbe, sampler: ChildSampler) -> None:
        self._outbox = outbox
        self._main = main
        self._sampler = sampler
        self.cuda: CudaReadings | None = None  # once the program has imported torch
        self.own_memory: dict[str, int] = {}  # torchleak's own bytes, by what holds them
        # (step, tensors, tensor bytes) of the latest census, for `torchleak attach`.
        self.latest_census: tuple[int, int, int] | None = None

    def allowed(self, probe: str) -> bool:
        return self._outbox.allowed(probe)

    def safely(self, probe: str, action: Callable[[], None]) -> None:
        self._outbox.safely(probe, action)

    def uss(self) -> int:
        """The process's private bytes, now."""
        return self._main.read()[1]

    @property
    def workers_uss(self) -> int:
        """The DataLoader workers' summed USS at the sampler's latest sweep."""
        return self._sampler.children_uss

    @property
    def cuda_latest(self) -> dict[int, tuple[int, ...]] | None:
        """The CUDA allocator's latest per-device reading, while CUDA is recorded."""
        return self.cuda.latest if self.cuda is not None else None

    def note_own_memory(self, key: str, nbytes: int) -> None:
        if nbytes > self.own_memory.get(key, 0):
            self.own_memory[key] = nbytes
