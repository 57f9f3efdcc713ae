"""Which malloc this process uses, its settings, and glibc's knobs through ctypes.

glibc keeps freed heap memory for reuse; a tiny live allocation placed after large
freed blocks keeps the whole region resident (the process "grows" though nothing
leaks). ``malloc_trim(0)`` hands those pages back; ``mallopt`` changes the thresholds;
``mallinfo2`` says how much free memory the heap holds (1-10 µs, it walks the free
lists). Every function here is a harmless no-op (False/None) where glibc is absent
(musl, macOS) or another malloc is preloaded.
"""

from __future__ import annotations

import ctypes
import functools
import os
import platform
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# mallopt(3) parameters.
M_TRIM_THRESHOLD = -1
M_TOP_PAD = -2
M_MMAP_THRESHOLD = -3
M_MMAP_MAX = -4
M_ARENA_TEST = -7
M_ARENA_MAX = -8

OTHER_MALLOCS = ("jemalloc", "tcmalloc", "mimalloc")
# Environment variables that change how the process allocates.
MALLOC_ENV_PREFIXES = ("MALLOC_", "GLIBC_TUNABLES", "LD_PRELOAD", "PYTHONMALLOC", "JE_",
                       "TCMALLOC_", "MIMALLOC_", "_RJEM_MALLOC_CONF")


@functools.lru_cache(maxsize=1)
def _libc() -> Any | None:
    """The C library of this process, when it is glibc."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None)
        version = libc.gnu_get_libc_version
    except (OSError, AttributeError):
        return None  # musl and others: no gnu_get_libc_version
    version.restype = ctypes.c_char_p
    libc.mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    libc.mallopt.restype = ctypes.c_int
    libc.malloc_trim.argtypes = (ctypes.c_size_t,)
    libc.malloc_trim.restype = ctypes.c_int
    return libc


def glibc_version() -> str | None:
    libc = _libc()
    return libc.gnu_get_libc_version().decode() if libc is not None else None


@dataclass(frozen=True)
class AllocatorInfo:
    """The malloc in use and how it is configured."""

    name: str  # glibc | jemalloc | tcmalloc | mimalloc | musl | system
    version: str | None  # known for glibc
    how: str  # how it was found
    glibc: str | None  # the C library's version, even when another malloc is preloaded
    settings: dict[str, str] = field(default_factory=dict)  # MALLOC_*, GLIBC_TUNABLES ...

    @property
    def is_glibc(self) -> bool:
        return self.name == "glibc"

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "version": self.version, "how": self.how,
                "glibc": self.glibc, "settings": dict(self.settings)}


def malloc_settings(environ: dict[str, str] | None = None) -> dict[str, str]:
    env = os.environ if environ is None else environ
    return {k: v for k, v in sorted(env.items()) if k.startswith(MALLOC_ENV_PREFIXES)}


def _mapped_libraries() -> str:
    try:
        return Path("/proc/self/maps").read_text()
    except OSError:
        return ""


@functools.lru_cache(maxsize=1)
def _other_malloc() -> tuple[str, str] | None:
    """(name, how) of a malloc that replaces glibc's here, None when there is none.

    A preloaded malloc is mapped before ``main`` and stays, so the answer is cached.
    An ``LD_PRELOAD`` naming one that is not mapped did not load (the loader said so).
    """
    preload = os.environ.get("LD_PRELOAD", "")
    maps = _mapped_libraries()
    for name in OTHER_MALLOCS:
        if f"lib{name}" in maps or (not maps and name in preload):
            return name, "LD_PRELOAD" if name in preload else "linked into the process"
    return None


def detect_allocator(environ: dict[str, str] | None = None) -> AllocatorInfo:
    """Which malloc serves this process: a preloaded one (mapped into the process),
    else the C library's own."""
    settings = malloc_settings(environ)
    libc_version = glibc_version()
    other = _other_malloc()
    if other is not None:
        return AllocatorInfo(other[0], None, other[1], libc_version, settings)
    if libc_version is not None:
        return AllocatorInfo("glibc", libc_version, "gnu_get_libc_version", libc_version,
                             settings)
    maps = _mapped_libraries()
    if "ld-musl" in maps or "libc.musl" in maps:
        return AllocatorInfo("musl", None, "/proc/self/maps", None, settings)
    return AllocatorInfo("system", None, platform.system() or "unknown", None, settings)


def _glibc_malloc() -> Any | None:
    """glibc's functions, only when glibc's malloc is the one in use."""
    return _libc() if _other_malloc() is None else None


def malloc_trim(pad: int = 0) -> bool:
    """glibc ``malloc_trim(pad)``: True when it gave memory back to the system."""
    libc = _glibc_malloc()
    if libc is None:
        return False
    try:
        return bool(libc.malloc_trim(max(0, int(pad))))
    except (OSError, ValueError):
        return False


def mallopt(param: int, value: int) -> bool:
    """glibc ``mallopt(param, value)``: True when glibc accepted the setting."""
    libc = _glibc_malloc()
    if libc is None:
        return False
    try:
        return libc.mallopt(int(param), int(value)) == 1
    except (OSError, ValueError):
        return False


class _Mallinfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
        "fordblks", "keepcost")]


@dataclass(frozen=True)
class HeapStats:
    """glibc's heap (all arenas): from ``mallinfo2``."""

    heap: int  # bytes taken from the system with brk/sbrk and arena heaps
    in_use: int  # bytes in allocated chunks
    free: int  # bytes in free chunks: the allocator's slack (resident or already trimmed)
    free_chunks: int
    mmapped: int  # bytes in chunks served by mmap (returned at free)
    top_releasable: int  # free bytes at the top that trimming the top would release

    def to_dict(self) -> dict[str, int]:
        return dict(self.__dict__)


@functools.lru_cache(maxsize=1)
def _mallinfo2() -> Any | None:
    libc = _glibc_malloc()
    fn = getattr(libc, "mallinfo2", None) if libc is not None else None  # glibc >= 2.33
    if fn is not None:
        fn.restype = _Mallinfo2
        fn.argtypes = ()
    return fn


def heap_stats() -> HeapStats | None:
    """glibc heap figures, None without glibc >= 2.33 (``mallinfo2``)."""
    fn = _mallinfo2()
    if fn is None:
        return None
    try:
        info = fn()
    except OSError:
        return None
    return HeapStats(info.arena, info.uordblks, info.fordblks, info.ordblks, info.hblkhd,
                     info.keepcost)
