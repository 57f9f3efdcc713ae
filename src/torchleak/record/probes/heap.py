"""Where the process's memory sits: Python objects, and the C allocator's own accounting.

``sys.getallocatedblocks()`` counts live Python objects (pymalloc blocks). glibc's
``mallinfo2()`` splits the C heap into bytes handed out (``uordblks``, which includes
tensors' CPU storage), freed bytes the allocator keeps in its heaps (``fordblks``) and
bytes in its own mmap()ed blocks (``hblkhd``). Together with the process's USS they tell
a leak of Python objects from a native one, and both from freed memory the allocator
does not give back. ``mallinfo2`` walks the free lists under the arena lock (~10 us on a
tidy heap, ~1 ms on a fragmented one), so it is sampled off the training thread, rarely.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

from torchleak.system.allocator import heap_stats


@dataclass(frozen=True)
class HeapSample:
    py_blocks: int
    malloc_in_use: int | None
    malloc_free: int | None
    malloc_mmapped: int | None


class HeapProbe:
    """Python's live blocks, and glibc's split when glibc's malloc serves the process."""

    def sample(self) -> HeapSample:
        blocks = sys.getallocatedblocks()
        stats = heap_stats()  # None: musl, macOS, old glibc, a preloaded allocator
        if stats is None:
            return HeapSample(blocks, None, None, None)
        return HeapSample(blocks, stats.in_use, stats.free, stats.mmapped)
