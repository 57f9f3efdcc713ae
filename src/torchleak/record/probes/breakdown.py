"""Where the measured memory goes, at a census: the split written to ``breakdown`` rows.

The host total is the main process's USS (the same private-bytes reading every step
records) plus the DataLoader workers' USS at the sampler's latest sweep. It splits into:

- the tensor roles the census found (``categories``): CPU storages only;
- ``python_objects``: the non-tensor heap, measured rather than estimated: the bytes in
  live pymalloc blocks (CPython's small-object allocator, read from its own statistics)
  plus the C allocator's bytes in use (glibc ``mallinfo2``: arenas and mmapped chunks)
  minus the CPU tensor bytes, which that allocator also hands out. This is every Python
  object and the native libraries' own heap;
- ``allocator_slack``: the USS nothing above explains: freed memory the allocators keep,
  libraries' private pages, thread stacks. It is never dropped, and kept signed: a small
  negative value means two readings a few microseconds apart disagree (or a tensor's
  bytes are not resident), and keeping it is what makes the categories sum to the total;
- ``workers``: the workers' USS.

Readings are taken together right after the census has freed its own scan, so the
split describes one instant. On CUDA the device's used memory (driver total minus free)
splits into the ``cuda_`` tensor roles, ``cuda_other_tensors`` (the rest of what
PyTorch's allocator handed out), ``cuda_cache`` (reserved minus allocated) and
``cuda_other`` (used outside PyTorch's allocator: contexts, NCCL, cuBLAS workspaces,
other processes).
"""

from __future__ import annotations

import ctypes
import re

from torchleak.system.allocator import heap_stats

HOST_TENSORS = ("parameters", "gradients", "optimizer_state", "autograd_saved",
                "other_tensors")
_ALLOCATED = re.compile(rb"# bytes in allocated blocks\s*=\s*([\d,]+)")


class PymallocStats:
    """Bytes in live pymalloc blocks, from CPython's own allocator statistics written to
    an in-memory stream (nothing reaches the program's stdout or stderr). None where the
    interpreter does not use pymalloc or the C library lacks ``open_memstream``."""

    def __init__(self) -> None:
        self._ready = False
        try:
            self._libc = ctypes.CDLL(None)
            self._libc.open_memstream.restype = ctypes.c_void_p
            self._libc.open_memstream.argtypes = [ctypes.POINTER(ctypes.c_char_p),
                                                  ctypes.POINTER(ctypes.c_size_t)]
            self._libc.fclose.argtypes = [ctypes.c_void_p]
            self._libc.free.argtypes = [ctypes.c_void_p]
            self._stats = ctypes.pythonapi._PyObject_DebugMallocStats
            self._stats.argtypes = [ctypes.c_void_p]
            self._stats.restype = ctypes.c_int
            self._ready = True
        except (OSError, AttributeError):
            pass

    def allocated(self) -> int | None:
        if not self._ready:
            return None
        buffer, size = ctypes.c_char_p(), ctypes.c_size_t()
        stream = self._libc.open_memstream(ctypes.byref(buffer), ctypes.byref(size))
        if not stream:
            return None
        try:
            used = self._stats(stream)
        finally:
            self._libc.fclose(stream)  # flushes: buffer and size are final after it
        try:
            text = ctypes.string_at(buffer, size.value) if buffer else b""
        finally:
            self._libc.free(buffer)
        match = _ALLOCATED.search(text)
        return int(match.group(1).replace(b",", b"")) if used and match else None


class HostReader:
    """The heap readings a split needs, made once and reused at every census."""

    def __init__(self) -> None:
        self._pymalloc = PymallocStats()

    def heap(self) -> tuple[int | None, int | None]:
        """(pymalloc bytes in live blocks, C allocator bytes in use)."""
        small = self._pymalloc.allocated()
        stats = heap_stats()  # None where glibc's malloc does not serve the process
        return small, None if stats is None else stats.in_use + stats.mmapped


def host_split(tensors: dict[str, int], uss: int, workers: int, small: int | None,
               malloc_in_use: int | None) -> dict[str, int]:
    """The host categories and their ``total``: they sum to it exactly."""
    split = {name: int(tensors.get(name, 0)) for name in HOST_TENSORS}
    cpu_tensors = sum(split.values())
    python = small or 0
    if malloc_in_use is not None:
        python += max(0, malloc_in_use - cpu_tensors)
    split["python_objects"] = python
    split["allocator_slack"] = uss - cpu_tensors - python
    if workers > 0:
        split["workers"] = workers
    split["total"] = uss + workers
    return {name: value for name, value in split.items()
            if value or name in ("allocator_slack", "total")}


def cuda_split(tensors: dict[str, int], allocated: int, reserved: int, free: int,
               total: int) -> dict[str, int]:
    """The device categories of one CUDA device and ``cuda_total`` (its used memory)."""
    split = {name: int(value) for name, value in tensors.items()
             if name.startswith("cuda_") and value}
    split["cuda_other_tensors"] = max(0, allocated - sum(v for k, v in split.items()
                                                          if k != "cuda_other_tensors"))
    split["cuda_cache"] = max(0, reserved - allocated)
    used = max(0, total - free)
    split["cuda_other"] = max(0, used - reserved)
    split["cuda_total"] = used
    return split


def measure_cuda(tensors: dict[str, int], latest: dict[int, tuple[int, ...]]) -> dict[str, int]:
    """The CUDA split of the device the step's CUDA sample read (``latest``: allocated and
    reserved per device, read at this boundary), with the driver's free memory now."""
    if not latest:
        return {}
    import torch

    device = min(latest)
    allocated, reserved = latest[device][:2]
    free, total = torch.cuda.mem_get_info(device)
    return cuda_split(tensors, int(allocated), int(reserved), int(free), int(total))
