"""Process memory: the main process every step (cheap), children on a background thread.

Per step we read ``/proc/self/statm`` through an fd kept open (~3 µs): resident pages and
resident *shared* pages (file-backed + shmem). Their difference is the process's private
anonymous memory, which for a training process is where leaked tensors and Python objects
live; it equals USS until the process forks (see ``docs/trace-schema.md``). Exact USS/PSS
come from ``smaps_rollup`` (~0.3-2 ms a process), read off the training thread.
"""

from __future__ import annotations

import os
import threading
import time
import weakref
from collections.abc import Callable

import psutil

from torchleak.record.probes.heap import HeapProbe, HeapSample
from torchleak.system.procmem import read_smaps_rollup

EARLY_SECONDS = 15.0
EARLY_CPU_SHARE = 0.25
# Workers whose summed USS stayed within QUIET_BYTES (per worker) of where it was
# QUIET_SWEEPS sweeps and QUIET_STEPS steps ago are read at QUIET_CPU_SHARE: a worker's
# smaps_rollup costs ~5 ms of a core that a 2-core machine's training and workers share.
# Any drift past that reads densely again. The steps matter: a worker cache of 32 KiB a
# step moves less than 1 MiB over four sweeps of a loaded machine's slow steps.
QUIET_SWEEPS = 4
QUIET_STEPS = 128
QUIET_BYTES = 1 << 20
QUIET_CPU_SHARE = 0.02
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


class MainMemoryProbe:
    """RSS and private bytes of this process, cheap enough for every step."""

    def __init__(self) -> None:
        self._fd: int | None = None
        try:
            self._fd = os.open("/proc/self/statm", os.O_RDONLY)
        except OSError:  # not Linux: psutil fallback, RSS only
            self._proc = psutil.Process()

    def read(self) -> tuple[int, int]:
        """(rss, private) in bytes."""
        if self._fd is not None:
            fields = os.pread(self._fd, 128, 0).split()
            resident, shared = int(fields[1]), int(fields[2])
            return resident * _PAGE, (resident - shared) * _PAGE
        rss = self._proc.memory_info().rss
        return rss, rss

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


class ChildSampler:
    """Samples the main process, every child (DataLoader workers) and the heap's split off
    the training thread.

    The training thread does nothing for it: this thread wakes on its own, reads
    ``smaps_rollup`` of each child (at most every ``min_interval`` s), of the main process
    (at most every ``main_interval`` s: walking our own page tables costs ~5-10 ms with
    torch loaded and contends with the training thread's mmap/munmap, so we keep it rare;
    the per-step statm read already gives the main process's private memory) and the heap split (``heap``, at
    most every ``heap_interval`` s: it holds the allocator's lock while it counts).
    """

    def __init__(
        self,
        emit: Callable[[int, float, int, str, int, int, int], None],
        current_step: Callable[[], int],
        min_interval: float = 0.05,
        main_interval: float = 10.0,
        children_refresh: float = 1.0,
        emit_heap: Callable[[int, float, HeapSample], None] | None = None,
        heap_interval: float = 2.0,
    ) -> None:
        self._emit = emit
        self._emit_heap = emit_heap
        self._heap = HeapProbe() if emit_heap is not None else None
        self._heap_interval = heap_interval
        self._heap_at = 0.0
        self._current_step = current_step
        self._min_interval = min_interval
        self._main_interval = main_interval
        self._children_refresh = children_refresh
        self._stop = threading.Event()
        self._wake = threading.Event()  # a fork wakes us early
        self._me = psutil.Process()
        self._children: list[int] = []
        self._workers: dict[int, bool] = {}  # pid -> counted as a worker
        self._own_cmdline = _cmdline(os.getpid())
        self._children_at = 0.0
        self._main_at = 0.0
        self._thread = threading.Thread(target=self._loop, name="torchleak-sampler", daemon=True)
        self.children_uss = 0  # the workers' summed USS at the latest sweep
        self._still = 0  # sweeps the workers' memory has stayed put
        # (pids, summed USS, step) where the workers' memory was last seen to move
        self._still_from: tuple[frozenset[int], int, int] = (frozenset(), 0, 0)
        self.quiet = False  # still over QUIET_SWEEPS sweeps and QUIET_STEPS steps
        self.error: str | None = None  # why the sampler stopped (text: no traceback kept)
        self.cpu_share = 0.10
        self._started = time.monotonic()

    def start(self) -> None:
        # A fork (DataLoader starting its workers) makes the cached list stale: relist and
        # sample at once, whatever the pacing.
        _FORK_WAKES.add(self)
        self._thread.start()

    def _forked(self) -> None:
        self._children_at = 0.0
        self._wake.set()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread.is_alive():
            self._thread.join(timeout=2)

    def _loop(self) -> None:
        try:
            while not self._stop.is_set():
                began = time.thread_time()
                self.sample_once()
                # Stay under ~10% of one core: big workers make smaps_rollup slow (CPU time:
                # reading another process's smaps holds no GIL).
                cost = time.thread_time() - began
                # Denser at first (detection needs points early), then lighter.
                now = time.monotonic()
                early = now - self._started < EARLY_SECONDS
                share = EARLY_CPU_SHARE if early else self.cpu_share
                if self.quiet:
                    share = min(share, QUIET_CPU_SHARE)
                wait = max(self._min_interval, cost / share)
                if not self._children:
                    # Nothing to sample between the heap's and the main process's turns:
                    # each wake takes the GIL from the training thread. A fork wakes us.
                    wait = max(wait, self._next_due(now, early) - now)
                self._wake.wait(wait)
                self._wake.clear()
        except BaseException as err:  # a probe never raises into training: record and stop
            self.error = f"{type(err).__name__}: {err}"

    def _track_stillness(self, pids: frozenset[int], step: int) -> None:
        pids_then, uss_then, _ = self._still_from
        if pids and pids == pids_then and (
                abs(self.children_uss - uss_then) <= QUIET_BYTES * len(pids)):
            self._still += 1
        else:  # new workers, or memory on the move: measured from here
            self._still = 0
            self._still_from = (pids, self.children_uss, step)
        self.quiet = self._still >= QUIET_SWEEPS and step - self._still_from[2] >= QUIET_STEPS

    def _next_due(self, now: float, early: bool) -> float:
        """When the next sweep has something to do: relist the children, the heap, us."""
        heap = (self._heap_at + self._heap_interval * (0.5 if early else 1.0)
                if self._heap is not None else now + self._children_refresh)
        return min(self._children_at + self._children_refresh, heap,
                   self._main_at + self._main_interval)

    def sample_once(self) -> None:
        now = time.monotonic()
        step, t = self._current_step(), time.time()
        if now - self._children_at > self._children_refresh:
            self._children = [pid for pid in self._list_children() if self._worker(pid)]
            self._children_at = now
        latest: dict[int, int] = {}
        for pid in self._children:
            mem = read_smaps_rollup(pid)
            if mem is not None and mem.rss > 0:  # an exiting worker reads as empty
                latest[pid] = mem.uss
                self._emit(step, t, pid, "worker", mem.rss, mem.uss, mem.pss)
        self.children_uss = sum(latest.values())
        self._track_stillness(frozenset(latest), step)
        if now - self._main_at > self._main_interval:
            self._main_at = now
            mem = read_smaps_rollup(os.getpid())
            if mem is not None:
                self._emit(step, t, mem.pid, "main", mem.rss, mem.uss, mem.pss)
        early = now - self._started < EARLY_SECONDS
        if self._heap is not None and self._emit_heap is not None and (
                now - self._heap_at > self._heap_interval * (0.5 if early else 1.0)):
            self._heap_at = now
            self._emit_heap(step, t, self._heap.sample())

    def _worker(self, pid: int) -> bool:
        """A worker is a fork of this process (its command line is ours) or a process
        multiprocessing started (spawn, forkserver); a program the script runs (a
        TensorBoard server, a compiler, a test's own subprocess) is not one."""
        known = self._workers.get(pid)
        if known is None:
            cmdline = _cmdline(pid)
            known = cmdline is None or cmdline == self._own_cmdline or (
                b"multiprocessing" in cmdline)
            if len(self._workers) > 4096:
                self._workers.clear()
            self._workers[pid] = known
        return known

    def _list_children(self) -> list[int]:
        """Every descendant, from the kernel's per-thread children lists (~0.1 ms; psutil
        scans all of /proc, ~2 ms), psutil where those lists do not exist."""
        found: list[int] = []
        pending = [os.getpid()]
        try:
            while pending:
                pid = pending.pop()
                for task in os.listdir(f"/proc/{pid}/task"):
                    with open(f"/proc/{pid}/task/{task}/children", "rb") as handle:
                        kids = [int(k) for k in handle.read().split()]
                    found.extend(kids)
                    pending.extend(kids)
            return found
        except (OSError, ValueError):
            try:
                return [c.pid for c in self._me.children(recursive=True)]
            except psutil.Error:
                return []


def _cmdline(pid: int) -> bytes | None:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            return handle.read()
    except OSError:
        return None


# Samplers a fork wakes. A fork handler cannot be removed once registered: one handler
# for the process, over samplers held weakly (a stopped recording's is never kept alive).
_FORK_WAKES: weakref.WeakSet[ChildSampler] = weakref.WeakSet()


def _wake_all() -> None:
    for sampler in list(_FORK_WAKES):
        sampler._forked()


os.register_at_fork(after_in_parent=_wake_all)
