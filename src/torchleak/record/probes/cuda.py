"""CUDA caching-allocator statistics per device, only once the user's code has initialised
CUDA (we never create a CUDA context ourselves: it costs ~500 MB per process)."""

from __future__ import annotations

from typing import Any

import torch

_KEYS = (
    "allocated_bytes.all.current", "reserved_bytes.all.current",
    "active_bytes.all.current", "inactive_split_bytes.all.current",
    "allocated_bytes.all.peak", "reserved_bytes.all.peak",
    "num_alloc_retries", "num_ooms",
)


def cuda_available() -> bool:
    """Whether this process can use CUDA at all (checked once: it does not change)."""
    try:
        return torch.cuda.is_available()
    except Exception:  # noqa: BLE001 - a broken driver is "no CUDA" to us
        return False


def cuda_ready() -> bool:
    return torch.cuda.is_available() and torch.cuda.is_initialized()


class CudaProbe:
    """One row per device: allocated, reserved, active, inactive_split, peaks, retries,
    OOMs, and the driver's free/total."""

    def sample(self, step: int) -> list[tuple[Any, ...]]:
        if not cuda_ready():
            return []
        rows = []
        for device in range(torch.cuda.device_count()):
            stats = torch.cuda.memory_stats(device)
            free, total = torch.cuda.mem_get_info(device)
            rows.append((step, device, *(int(stats.get(k, 0)) for k in _KEYS), free, total))
        return rows


def gpu_totals() -> list[dict[str, Any]]:
    """Device names and totals, without initialising CUDA."""
    if not torch.cuda.is_available():
        return []
    totals = []
    for device in range(torch.cuda.device_count()):
        props = torch.cuda.get_device_properties(device)
        totals.append({"device": device, "name": props.name, "total": int(props.total_memory)})
    return totals
