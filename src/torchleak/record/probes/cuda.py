"""CUDA caching-allocator statistics, only for devices the program itself uses.

We never create a CUDA context (several hundred MB per device per process): nothing is
read before the program has initialised CUDA, and only devices where the program has
memory (or its current device) are probed. Each step reads the two counters a leak
needs (allocated, reserved) from one call for the allocator's counters, nested as the
allocator keeps them (``memory_stats`` flattens the same dict into ~200 keys in Python:
84 against 11 us a call on an H200's host); the driver's free/total and the
fragmentation counters are read every ``FULL_EVERY`` steps. Nothing here synchronises a
stream: these are host-side counters.
"""

from __future__ import annotations

from typing import Any

import torch

FULL_EVERY = 16  # steps between full samples (driver free/total, fragmentation counters)
# Counters by their path in the nested dict (``memory_stats`` names them joined by dots).
_CURRENT = (("allocated_bytes", "all", "current"), ("reserved_bytes", "all", "current"))
_FULL = (("active_bytes", "all", "current"), ("inactive_split_bytes", "all", "current"),
         ("allocated_bytes", "all", "peak"), ("reserved_bytes", "all", "peak"),
         ("num_alloc_retries",), ("num_ooms",))


def _counter(stats: dict[str, Any], path: tuple[str, ...]) -> int:
    node: Any = stats
    for part in path:
        node = node.get(part) if isinstance(node, dict) else None
    return int(node or 0)


def cuda_in_use() -> bool:
    """True once the program has initialised CUDA (never initialises it itself)."""
    try:
        return bool(torch.cuda.is_initialized())
    except Exception:  # noqa: BLE001 - a broken driver is "no CUDA" to us
        return False


def used_devices() -> list[int]:
    """Devices the program has memory on, plus its current device."""
    devices = {torch.cuda.current_device()}
    for device in range(torch.cuda.device_count()):
        # The allocator's counters are host-side: reading them creates no context.
        if torch.cuda.memory_reserved(device) > 0:
            devices.add(device)
    return sorted(devices)


class CudaProbe:
    """One row per used device: allocated and reserved every step; active, inactive_split,
    peaks, retries, OOMs and the driver's free/total every ``FULL_EVERY`` steps."""

    def __init__(self) -> None:
        self._devices: list[int] = []
        self._last: dict[int, tuple[Any, ...]] = {}
        self.totals: dict[int, int] = {}
        self.latest: dict[int, tuple[int, ...]] = {}  # (allocated, reserved) at the last step

    def sample(self, step: int) -> list[tuple[Any, ...]]:
        if not cuda_in_use():
            return []
        full = step % FULL_EVERY == 1 or not self._devices
        if full:
            self._devices = used_devices()
        rows = []
        for device in self._devices:
            stats = torch.cuda.memory_stats_as_nested_dict(device)
            current = tuple(_counter(stats, path) for path in _CURRENT)
            self.latest[device] = current
            if full or device not in self._last:
                free, total = torch.cuda.mem_get_info(device)
                self.totals[device] = int(total)
                self._last[device] = (*(_counter(stats, path) for path in _FULL),
                                      int(free), int(total))
            rows.append((step, device, *current, *self._last[device]))
        return rows


def device_names() -> list[dict[str, Any]]:
    """Names and totals of the used devices (only once the program initialised CUDA)."""
    if not cuda_in_use():
        return []
    found = []
    for device in used_devices():
        props = torch.cuda.get_device_properties(device)
        found.append({"device": device, "name": props.name, "total": int(props.total_memory)})
    return found
