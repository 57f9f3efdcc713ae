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

import ctypes
import sys
from dataclasses import dataclass


class _MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
        "fordblks", "keepcost")]


@dataclass(frozen=True)
class HeapSample:
    py_blocks: int
    malloc_in_use: int | None
    malloc_free: int | None
    malloc_mmapped: int | None


class HeapProbe:
    def __init__(self) -> None:
        self._mallinfo2 = None
        try:
            libc = ctypes.CDLL(None)
            function = libc.mallinfo2  # glibc >= 2.33
            function.restype = _MallInfo2
            function.argtypes = []
            self._mallinfo2 = function
        except (OSError, AttributeError):
            pass  # musl, macOS, old glibc: Python blocks only

    def sample(self) -> HeapSample:
        blocks = sys.getallocatedblocks()
        if self._mallinfo2 is None:
            return HeapSample(blocks, None, None, None)
        info = self._mallinfo2()
        return HeapSample(blocks, int(info.uordblks), int(info.fordblks), int(info.hblkhd))
