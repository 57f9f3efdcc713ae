"""CUDA caching-allocator statistics, only for devices the program itself uses.

We never create a CUDA context (several hundred MB per device per process): nothing is
read before the program has initialised CUDA, and only devices where the program has
memory (or its current device) are probed. A sample reads the two counters a leak
needs (allocated, reserved) from one call for the allocator's counters, nested as the
allocator keeps them (``memory_stats`` flattens the same dict into ~200 keys in Python:
84 against 11 us a call on an H200's host, in a tight loop); the device list, the
driver's free/total and the fragmentation counters at most every ``FULL_SECONDS``
(``mem_get_info`` ~95 us in place on an H100's host, the device list ~290 us when it asked
``memory_reserved``, which flattens). Nothing here synchronises a stream: these are
host-side counters. When samples are taken is the watch's (``cuda_watch``).
"""

from __future__ import annotations

from typing import Any

import torch

FULL_SECONDS = 1.0  # between full samples (devices, driver free/total, fragmentation)
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
        stats = torch.cuda.memory_stats_as_nested_dict(device)
        if _counter(stats, _CURRENT[1]) > 0:
            devices.add(device)
    return sorted(devices)


class CudaProbe:
    """One row per used device a sample: allocated and reserved each time; active,
    inactive_split, peaks, retries, OOMs and the driver's free/total (and which devices are
    used) at most every ``FULL_SECONDS`` (copied from the last full sample between)."""

    def __init__(self) -> None:
        self._devices: list[int] = []
        self._last: dict[int, tuple[Any, ...]] = {}
        self._full_next = 0.0  # perf_counter time of the next full sample
        self.totals: dict[int, int] = {}
        self.latest: dict[int, tuple[int, ...]] = {}  # (allocated, reserved) at the last sample

    def sample(self, step: int, now: float) -> list[tuple[Any, ...]]:
        """``now``: the boundary's ``time.perf_counter()``."""
        if not cuda_in_use():
            return []
        full = now >= self._full_next or not self._devices
        if full:
            self._full_next = now + FULL_SECONDS
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
