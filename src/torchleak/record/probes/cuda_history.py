"""The CUDA caching allocator's own history, recorded over a bounded window and saved as
the pickle PyTorch's memory viewer (https://pytorch.org/memory_viz) opens.

Recording allocation stacks costs time on every allocation, so it is switched on only
once a CUDA finding has been called (or the guard fired), for at most ``MAX_ENTRIES``
allocator events, and switched off when the snapshot is saved: at the guard, or after
``WINDOW_STEPS`` steps, or at the end of the run. Everything here runs on the training
thread at a step boundary and only when the program itself uses CUDA.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

MAX_ENTRIES = 100_000
WINDOW_STEPS = 200
SNAPSHOT_NAME = "cuda_snapshot.pickle"


class CudaHistory:
    def __init__(self, folder: Path, memory: Any = None) -> None:
        self._folder = folder
        self._memory = memory  # torch.cuda.memory (a stand-in in tests)
        self.started_at: int | None = None
        self.saved: Path | None = None

    def _api(self) -> Any:
        if self._memory is None:
            import torch.cuda.memory as memory

            self._memory = memory
        return self._memory

    @property
    def recording(self) -> bool:
        return self.started_at is not None and self.saved is None

    def start(self, step: int) -> None:
        """Record allocations with their stacks from now on (once per run)."""
        if self.started_at is not None:
            return
        self._api()._record_memory_history(enabled="all", max_entries=MAX_ENTRIES)
        self.started_at = step

    def due(self, step: int) -> bool:
        return self.recording and step - (self.started_at or step) >= WINDOW_STEPS

    def save(self) -> Path | None:
        """Write the snapshot into the run folder and stop recording."""
        if not self.recording:
            return self.saved
        api = self._api()
        path = self._folder / SNAPSHOT_NAME
        try:
            api._dump_snapshot(str(path))
        finally:
            api._record_memory_history(enabled=None)
        self.saved = path
        return path
