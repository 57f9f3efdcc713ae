"""How much memory this process holds right now: USS, RSS, and CUDA reserved.

USS (private pages) is what the process would give back if it ended, so it is what a
cleanup can free; RSS also counts shared library pages. CUDA is read only when torch is
already imported and CUDA already initialised here: reading it must never create a
CUDA context.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass

from torchleak.system.limits import page_size


@dataclass(frozen=True)
class MemoryNow:
    uss: int | None
    rss: int | None
    cuda_reserved: int | None  # all devices; None when CUDA is not in use here

    def to_dict(self) -> dict[str, int | None]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class ProcessMemory:
    pid: int
    rss: int
    uss: int
    pss: int


def read_smaps_rollup(pid: int) -> ProcessMemory | None:
    """Exact USS/PSS/RSS of one process from ``/proc/PID/smaps_rollup`` (0.3-2 ms);
    psutil elsewhere; None if it is gone or unreadable."""
    try:
        with open(f"/proc/{pid}/smaps_rollup", "rb") as fh:
            text = fh.read()
    except OSError:
        return _psutil_memory(pid)
    values: dict[bytes, int] = {}
    for line in text.splitlines()[1:]:
        name, _, rest = line.partition(b":")
        parts = rest.split()
        if parts:
            values[name] = int(parts[0]) * 1024
    uss = values.get(b"Private_Clean", 0) + values.get(b"Private_Dirty", 0)
    return ProcessMemory(pid, values.get(b"Rss", 0), uss, values.get(b"Pss", 0))


def _psutil_memory(pid: int) -> ProcessMemory | None:
    import psutil

    try:
        info = psutil.Process(pid).memory_full_info()
    except (psutil.Error, OSError):
        return None
    return ProcessMemory(pid, info.rss, getattr(info, "uss", info.rss),
                         getattr(info, "pss", info.rss))


def rss_now() -> int | None:
    """Resident bytes from ``/proc/self/statm`` (a few µs), psutil elsewhere."""
    try:
        with open("/proc/self/statm", "rb") as fh:
            return int(fh.read().split()[1]) * page_size()
    except (OSError, IndexError, ValueError):
        pass
    try:
        import psutil

        return int(psutil.Process().memory_info().rss)
    except Exception:  # noqa: BLE001 - unknown platform: no figure
        return None


def cuda_in_use() -> bool:
    """True when torch is imported and CUDA is initialised in this process."""
    torch = sys.modules.get("torch")
    cuda = getattr(torch, "cuda", None)
    try:
        return bool(cuda is not None and cuda.is_initialized())
    except Exception:  # noqa: BLE001 - a broken or partial torch: treat as unused
        return False


def cuda_reserved() -> int | None:
    """Bytes the CUDA caching allocator holds on all devices; None when CUDA is unused."""
    if not cuda_in_use():
        return None
    cuda = sys.modules["torch"].cuda
    try:
        return sum(int(cuda.memory_reserved(i)) for i in range(cuda.device_count()))
    except Exception:  # noqa: BLE001 - the figure is optional
        return None


def memory_now() -> MemoryNow:
    rollup = read_smaps_rollup(os.getpid())
    if rollup is None:
        rss = rss_now()
        return MemoryNow(rss, rss, cuda_reserved())
    return MemoryNow(rollup.uss, rollup.rss, cuda_reserved())

