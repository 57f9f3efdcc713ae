"""CUDA caching-allocator statistics, only for devices the program itself uses.

We never create a CUDA context (several hundred MB per device per process): nothing is
read before the program has initialised CUDA, and only devices where the program has
memory (or its current device) are probed. A sample reads the allocator's counters from
one call, nested as the allocator keeps them (``memory_stats`` flattens the same dict into
~200 keys in Python: 84 against 11 us a call on an H200's host, in a tight loop), and takes
every counter a finding reads from that one dict. The device list and the driver's
free/total come at most every ``FULL_SECONDS`` (``mem_get_info`` ~95 us in place on an
H100's host); between, free/total are NULL (not measured), never copies. A full sample
reads each device's counters once (the device list is made from the same read). Nothing
here synchronises a stream: these are host-side counters. When samples are taken is the
watch's (``cuda_watch``).
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


def used_devices() -> dict[int, dict[str, Any]]:
    """Devices the program has memory on, plus its current device, in order, each with
    the allocator's counters read to tell."""
    current = torch.cuda.current_device()
    found = {}
    for device in range(torch.cuda.device_count()):
        # The allocator's counters are host-side: reading them creates no context.
        stats = torch.cuda.memory_stats_as_nested_dict(device)
        if device == current or _counter(stats, _CURRENT[1]) > 0:
            found[device] = stats
    return found


class CudaProbe:
    """One row per used device a sample: the allocator's counters each time; the driver's
    free/total (and which devices are used) at most every ``FULL_SECONDS``, NULL between."""

    def __init__(self) -> None:
        self._devices: list[int] = []
        self._full_next = 0.0  # perf_counter time of the next full sample
        self.latest: dict[int, tuple[int, ...]] = {}  # (allocated, reserved) at the last sample

    def sample(self, step: int, now: float) -> list[tuple[Any, ...]]:
        """``now``: the boundary's ``time.perf_counter()``."""
        if not cuda_in_use():
            return []
        full = now >= self._full_next or not self._devices
        if full:
            self._full_next = now + FULL_SECONDS
            read = used_devices()
            self._devices = list(read)
        else:
            read = {device: torch.cuda.memory_stats_as_nested_dict(device)
                    for device in self._devices}
        rows = []
        for device, stats in read.items():
            current = tuple(_counter(stats, path) for path in _CURRENT)
            self.latest[device] = current
            driver: tuple[int | None, int | None] = (None, None)
            if full:
                free, total = torch.cuda.mem_get_info(device)
                driver = (int(free), int(total))
            rows.append((step, device, *current, *(_counter(stats, path) for path in _FULL),
                         *driver))
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
