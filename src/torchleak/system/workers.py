"""DataLoader worker caps: how many workers this machine's memory holds, and a context
that applies the cap (and turns ``persistent_workers`` off) to every DataLoader made
inside it.

Each worker is a process that, through copy-on-read, ends up with a private copy of the
Python objects it touches (a dataset's list of dicts, the main process's caches): count
on a worker costing about as much as the main process's private memory when it forks.
Workers also pass batches through ``/dev/shm``. More workers than CPUs add memory
without speed. These caps can change speed, and the random augmentations a worker
draws, so they are opt-in (``--safe=workers``) and ``doctor`` proposes them.
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from torchleak.system.limits import cgroup_memory, machine_memory, memory_limit
from torchleak.units import format_bytes
from torchleak.system.procmem import memory_now
from torchleak.system.safe_change import SafeChange

MIN_WORKER_BYTES = 512 << 20
# A batch's size is not known before it exists; budget /dev/shm for batches this big.
ASSUMED_BATCH_BYTES = 32 << 20
DEFAULT_PREFETCH = 2


def cpu_count() -> int:
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def shm_free() -> int | None:
    try:
        stat = os.statvfs("/dev/shm")
    except OSError:
        return None
    return stat.f_bavail * stat.f_frsize


def memory_available() -> int | None:
    """Bytes this process may still take before its limit (cgroup or RAM)."""
    group = cgroup_memory()
    if group is not None and group.max is not None and group.usage is not None:
        return max(0, group.max - group.usage)
    return machine_memory().ram_available


@dataclass(frozen=True)
class WorkerCaps:
    max_workers: int
    persistent_off: bool
    reason: str

    def changes(self) -> list[SafeChange]:
        changes = [SafeChange("DataLoader.num_workers", f"<= {self.max_workers}",
                              "as the script sets", self.reason)]
        if self.persistent_off:
            changes.append(SafeChange("DataLoader.persistent_workers", "False",
                                      "as the script sets",
                                      "worker memory is reset each epoch instead of "
                                      "accumulating"))
        return changes


def worker_cap(per_worker: int | None = None, prefetch: int = DEFAULT_PREFETCH,
               batch_bytes: int | None = None) -> tuple[int, str]:
    """(workers this machine holds, the reason in words)."""
    per = max(MIN_WORKER_BYTES, per_worker or (memory_now().uss or 0))
    cpus = cpu_count()
    caps = [(cpus, f"{cpus} CPUs")]
    available = memory_available()
    if available is not None:
        caps.append((max(1, int(available * 0.8) // per),
                     f"{format_bytes(available)} of memory left holds "
                     f"{max(1, int(available * 0.8) // per)} workers of {format_bytes(per)}"))
    shm = shm_free()
    if shm is not None:
        batch = batch_bytes or ASSUMED_BATCH_BYTES
        fit = max(1, int(shm * 0.5) // (max(1, prefetch) * batch))
        caps.append((fit, f"/dev/shm has {format_bytes(shm)} free for "
                          f"{max(1, prefetch)} batches of {format_bytes(batch)} per worker"))
    cap, _ = min(caps, key=lambda item: item[0])
    return cap, "; ".join(text for _, text in caps)


def plan_worker_caps(per_worker: int | None = None) -> WorkerCaps:
    cap, reason = worker_cap(per_worker)
    limit = memory_limit()
    where = f" (limit: {limit.name} {format_bytes(limit.bytes)})" if limit else ""
    return WorkerCaps(cap, True, reason + where)


@dataclass
class DataLoaderCaps:
    """What ``cap_dataloaders`` changed, one entry per distinct change."""

    max_workers: int | None
    persistent_off: bool
    changes: list[SafeChange] = field(default_factory=list)

    def record(self, setting: str, value: object, was: object, why: str) -> None:
        change = SafeChange(setting, str(value), str(was), why)
        if change not in self.changes:
            self.changes.append(change)


def _cap_arguments(arguments: dict[str, Any], caps: DataLoaderCaps) -> None:
    workers = arguments.get("num_workers", 0)
    if isinstance(workers, int) and workers > 0:
        cap, reason = ((caps.max_workers, "the --safe=workers cap")
                       if caps.max_workers is not None else worker_cap(
                           prefetch=arguments.get("prefetch_factor") or DEFAULT_PREFETCH))
        if workers > cap:
            arguments["num_workers"] = cap
            caps.record("DataLoader.num_workers", cap, workers, reason)
    if caps.persistent_off and arguments.get("persistent_workers") is True:
        arguments["persistent_workers"] = False
        caps.record("DataLoader.persistent_workers", False, True,
                    "worker memory is reset each epoch instead of accumulating")


@contextmanager
def cap_dataloaders(max_workers: int | None = None,
                    persistent_off: bool = True) -> Iterator[DataLoaderCaps]:
    """Inside the block, every ``torch.utils.data.DataLoader`` gets at most
    ``max_workers`` workers (None: what memory holds when it is created, see
    ``worker_cap``) and, with ``persistent_off``, ``persistent_workers=False``.
    ``DataLoader.__init__`` is restored on exit. Imports torch."""
    from torch.utils.data import DataLoader

    original = DataLoader.__init__
    signature = inspect.signature(original)
    caps = DataLoaderCaps(max_workers, persistent_off)

    def capped_init(self: Any, *args: Any, **kwargs: Any) -> None:
        try:
            bound = signature.bind(self, *args, **kwargs)
            _cap_arguments(bound.arguments, caps)
            args, kwargs = bound.args[1:], bound.kwargs
        except Exception:  # noqa: BLE001 - unusual call: let DataLoader judge it unchanged
            pass
        original(self, *args, **kwargs)

    DataLoader.__init__ = capped_init  # type: ignore[method-assign]
    try:
        yield caps
    finally:
        DataLoader.__init__ = original  # type: ignore[method-assign]
