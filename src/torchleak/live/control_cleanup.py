"""``attach --cleanup``: free what the process can free, on the training thread, and say
how much each step freed.

``cleanup_in_process`` is the one place ``--cleanup`` is wired to. Until the full
``torchleak.system.cleanup.cleanup()`` is available it runs the minimal steps below
(collect garbage, give CUDA's cached blocks back, trim the C heap), measured the same way.
"""

from __future__ import annotations

import ctypes
import gc
import sys
from collections.abc import Callable
from typing import Any

from torchleak.record.probes.process import MainMemoryProbe
from torchleak.units import format_bytes

# Less than this freed in all reads as "nothing freed": page-level noise.
NOTHING = 1024 * 1024


def cleanup_in_process() -> dict[str, Any]:
    """{'steps': [...], 'freed': bytes, 'text': lines to show}."""
    return _minimal_cleanup()


def _minimal_cleanup() -> dict[str, Any]:
    probe = MainMemoryProbe()
    try:
        steps = [_measured("gc.collect()", _collect, probe)]
        cuda = _cuda_steps()
        if cuda is not None:
            steps.append(_measured_cuda(cuda))
        trim = _malloc_trim()
        if trim is not None:
            steps.append(_measured("malloc_trim(0)", trim, probe))
    finally:
        probe.close()
    freed = sum(max(0, s["freed"]) for s in steps)
    lines = [f"{s['name']}: freed {format_bytes(max(0, s['freed']))} {s['measure']}"
             + (f" ({s['detail']})" if s.get("detail") else "") for s in steps]
    if freed < NOTHING:
        lines.append("nothing worth mentioning was freed: the memory is still referenced; "
                     "`torchleak attach RUN --walk` names who holds it")
    return {"steps": steps, "freed": freed, "text": "\n".join(lines),
            "summary": f"freed {format_bytes(freed)}"}


def _measured(name: str, action: Callable[[], str], probe: MainMemoryProbe) -> dict[str, Any]:
    _rss, before = probe.read()
    detail = action()
    _rss, after = probe.read()
    return {"name": name, "freed": before - after, "measure": "of private memory (USS)",
            "detail": detail}


def _collect() -> str:
    found = gc.collect()
    return f"{found:,} unreachable objects"


def _cuda_steps() -> Any:
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    from torchleak.record.probes.cuda import cuda_in_use

    return torch if cuda_in_use() else None


def _measured_cuda(torch: Any) -> dict[str, Any]:
    before = torch.cuda.memory_reserved()
    torch.cuda.empty_cache()
    torch.cuda.ipc_collect()
    after = torch.cuda.memory_reserved()
    return {"name": "torch.cuda.empty_cache()", "freed": before - after,
            "measure": "of CUDA reserved memory", "detail": ""}


def _malloc_trim() -> Callable[[], str] | None:
    """glibc's malloc_trim(0): hands freed heap pages back to the system."""
    try:
        trim = ctypes.CDLL(None).malloc_trim  # glibc only: musl and macOS have none
    except (OSError, AttributeError):
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return lambda: "pages returned" if trim(0) else "nothing to return"
