"""The recording session: probes wired to step boundaries, writing one trace.

The training thread pays for: a clock read, one ``pread`` of ``/proc/self/statm``, the
CUDA allocator's two counters when the program uses CUDA, a list append, one check for
requests from other threads, and the expensive probes only when the scheduler grants
them. Everything else (children's USS/PSS, the heap split, SQLite writes) runs on daemon
threads. Nothing here imports torch before the program does: ``attach_torch`` wires the
torch probes in once the program has imported it.

The recorder records and never judges: the live engine (``torchleak.live``) reads the
trace, decides, and asks for work at the next boundary through ``request``.

The recorder is the lifecycle and the boundary; the rest is one object each: where rows,
events and failures go (``Outbox``, ``out``), what probes read of the recording
(``RecordingFacts``, ``facts``), which probes run when (``ProbePlan``, ``plan``), the
CUDA side (``CudaWatch``, ``cuda``), what makes a step (``StepSources``, ``sources``).
"""

from __future__ import annotations

import collections
import gc
import os
import sys
import threading
import time
import weakref
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

import psutil

from torchleak.record.facts import RecordingFacts
from torchleak.record.metadata import torch_metadata
from torchleak.record.outbox import Outbox
from torchleak.record.probe import Probe, ProbeContext
from torchleak.record.probes.process import ChildSampler, MainMemoryProbe
from torchleak.record.schedule import NEVER, Scheduler
from torchleak.record.steps import StepClock, StepSources
from torchleak.trace.writer import TraceWriter
from torchleak.vocab import RunStatus

if TYPE_CHECKING:
    from torchleak.record.cuda_watch import CudaWatch
    from torchleak.record.plan import ProbePlan
    from torchleak.record.probes.holders import HolderSample

# The process's memory is read at a boundary at most every MEMORY_READ_SECONDS while it
# moves, and at every boundary that runs a probe. A read is a system call that slows a
# sub-millisecond step by several times its own ~1.5 us (the kernel's work evicts the
# step's caches), so while readings come back unchanged the spacing doubles, up to
# MEMORY_READ_MAX_SECONDS; the first reading that differs makes it dense again. A flat
# run loses nothing (its memory is the same in between); a growing one is read as densely
# as before (spacing all reads out to 2 ms made a short run's printed rate less exact: an
# allocator's stairs seen in fewer points). Steps in between have no reading (NULL), never
# a copied one.
MEMORY_READ_SECONDS = 0.001
MEMORY_READ_MAX_SECONDS = 0.008
_perf_counter = time.perf_counter  # one lookup at the boundary, not two
# A request runs on the training thread at the next boundary, with the user's frame.
Request = Callable[[FrameType | None], None]


class Recorder:
    def __init__(self, trace_path: Path, metadata: dict[str, Any], budget: float = 0.01,
                 claim: bool = True, on_fault: Callable[[str], None] | None = None,
                 since_process_start: bool = False) -> None:
        self._on_fault = on_fault
        # The budget's clock: from the process's start (``torchleak run``: the process is
        # the run) or from ours (in-process: a test in a long pytest session must not
        # spend the minutes before it on probes).
        self._since_process_start = since_process_start
        # Our own memory: the process's private bytes before the recorder exists, against
        # after it has started (trace writer, SQLite connection, sampler and writer threads).
        self._main = MainMemoryProbe()
        self._uss_before = self._main.read()[1]
        self.writer = TraceWriter(trace_path, claim=claim, on_fault=self._writer_fault)
        self.out = Outbox(self.writer, lambda: self.step)
        self.metadata = metadata
        self.clock = StepClock()
        self.scheduler = Scheduler(budget=budget)
        self.step = 0
        self.epoch: int | None = None
        self.phase = "train"
        self.torch_attached = False
        self._sampler = ChildSampler(self.out.process_sample, lambda: self.step,
                                     emit_heap=self.out.heap_sample)
        self.facts = RecordingFacts(self.out, self._main, self._sampler)
        self.plan: ProbePlan | None = None  # which expensive probes run when (once torch is in)
        self.cuda: CudaWatch | None = None  # once torch is in
        self._modes: Any = None
        self._loaders: Any = None
        self._hook: Any = None
        self._is_compiling: Callable[[], bool] = lambda: False  # torch's, once it is in
        self._mark_compiled: Callable[[Any], None] = lambda optimizer: None
        self._requests: collections.deque[Request] = collections.deque()
        self._last_boundary = time.perf_counter()
        # unix time = perf_counter + this (set again at every memory reading): a boundary
        # reads one clock, not two
        self._wall_offset = time.time() - self._last_boundary
        self._step_row = self.writer.appender("steps")
        self._collections_inside = 0.0  # full collections inside this boundary's probes (s)
        self._in_child = False
        # Woken (set) at the first boundary whose step reaches ``wake_step`` (the live
        # detector sleeps until then): one comparison a step, no call.
        self.wake_step = NEVER
        self.wake: threading.Event | None = None
        # What makes a step: optimizer | manual | forward | time (docs/detection.md).
        self.sources = StepSources(self)
        # The newest memory reading, for framework loggers and attach: (step, rss, uss).
        self.latest: tuple[int, int, int] | None = None
        self._memory_read_next = 0.0  # perf_counter from which the next boundary reads
        self._memory_read_gap = MEMORY_READ_SECONDS  # doubled while readings repeat

    # lifecycle -------------------------------------------------------------------------
    def start(self) -> None:
        meta = dict(self.metadata, start_time=time.time(), status=RunStatus.RUNNING.value,
                    step_definition="one optimizer step cycle (docs/detection.md)")
        for key, value in meta.items():
            self.writer.set_meta(key, value)
        self.writer.flush()
        self.writer.start()
        self._sampler.start()
        # A weak reference: a finished recorder (a notebook's earlier run) is not kept alive.
        ref = weakref.ref(self)
        os.register_at_fork(after_in_child=lambda: _forked(ref))
        self._last_boundary = time.perf_counter()
        self.scheduler.started = (_process_start(self._last_boundary)
                                  if self._since_process_start else self._last_boundary)
        own = self.facts.own_memory
        own["start_bytes"] = max(0, self._main.read()[1] - self._uss_before)
        self.writer.set_meta("own_memory", own)

    def attach_torch(self) -> None:
        """Wire the torch probes in: the program has imported torch (never called before)."""
        if self.torch_attached:
            return
        import torch
        from torch.optim.optimizer import register_optimizer_step_post_hook

        from torchleak.record.compiled_steps import step_marker
        from torchleak.record.phases import LoaderWatcher, ModeWatcher
        from torchleak.record.cuda_watch import CudaWatch
        from torchleak.record.plan import ProbePlan
        from torchleak.record.probe import registered
        from torchleak.record.probes.holder_probes import HolderWalk

        self.torch_attached = True
        self.plan = ProbePlan(self.scheduler, HolderWalk(), [p() for p in registered()],
                              self.out.off)
        self.cuda = self.facts.cuda = CudaWatch(self.out, self.writer.path.parent)
        self._modes = ModeWatcher(self.mark)
        self._modes.install()
        self._loaders = LoaderWatcher(self.mark)
        self._loaders.install()
        self._is_compiling = torch.compiler.is_compiling
        self._mark_compiled = step_marker()
        self._hook = register_optimizer_step_post_hook(self._optimizer_hook)
        self.sources.attach()  # loops with no optimizer: forward calls, else time samples
        for key, value in torch_metadata().items():
            self.writer.set_meta(key, value)

    def stop(self, status: str, exit_code: int | None) -> None:
        """Unhook, take the end-of-run walk, and write the final metadata."""
        if self._hook is not None:
            self._hook.remove()
            self._hook = None
        if self._modes is not None:
            self._modes.uninstall()
        if self._loaders is not None:
            self._loaders.uninstall()
        self.sources.detach()
        self._sampler.stop()
        if self.step > 0 and self.plan is not None:
            self.plan.end(self.step, self._run_probe)
        if self.cuda is not None:
            self.out.safely("cuda_history", self.cuda.save_history)
        if self._sampler.error is not None:
            self.out.event("probe_disabled", "process_sampler", self._sampler.error)
        for key, value in {"status": status, "exit_code": exit_code, "end_time": time.time(),
                           "steps": self.step,
                           "monitor_seconds": round(self.scheduler.spent, 4),
                           # the wall time the budget counted against (``torchleak run``:
                           # the process's, start-up included; in-process: the monitor's)
                           "process_seconds": round(
                               time.perf_counter() - self.scheduler.started, 3),
                           "anchor_probe_seconds": round(self.scheduler.early_spent, 4),
                           "probe_costs": self.scheduler.summary(),
                           "phase_walks": self.plan.phase_summary() if self.plan else None,
                           "probes_disabled": sorted(self.out.off),
                           "own_memory": self.facts.own_memory}.items():
            self.writer.set_meta(key, value)
        self.writer.stop_thread()
        self.writer.flush()

    def close(self) -> None:
        self._main.close()
        self.writer.close()

    def _forked(self) -> None:
        # DataLoader workers inherit us: they must never record into the parent's trace.
        self._in_child = True

    def _writer_fault(self, reason: str) -> None:
        self.out.off.add("trace")
        if self._on_fault is not None:
            self._on_fault(reason)

    # requests from other threads ----------------------------------------------------------
    def hunt(self) -> None:
        """Growth no holder explains: look again (``ProbePlan.hunt``)."""
        if self.plan is not None:
            self.plan.hunt()

    def confirm(self, paths: list[str]) -> None:
        """Holders the live detector suspects: re-measure them (``ProbePlan.confirm``)."""
        if self.plan is not None:
            self.plan.confirm(paths)

    def request(self, action: Request) -> None:
        """Run ``action(frame)`` on the training thread at the next step boundary."""
        self._requests.append(action)

    def _serve_requests(self, frame: FrameType | None) -> None:
        while self._requests:
            action = self._requests.popleft()
            try:
                action(frame)
            except Exception as err:  # noqa: BLE001 - BaseExceptions (a guard stop) go through
                self.out.event("request_failed", "recorder", f"{type(err).__name__}: {err}")

    def snapshot(self, frame: FrameType | None, reason: str) -> None:
        """A full holder walk and census now (and the CUDA allocator's history when the
        program uses CUDA), on the training thread."""
        if self.plan is not None:
            self._run_probe(self.plan.walk, self.step, frame, reason)
            for probe in self.plan.probes:
                self._run_probe(probe, self.step, frame, reason)
        if self.cuda is not None and self.cuda.live:
            self.out.safely("cuda_history", self.cuda.save_history)

    def start_cuda_history(self) -> None:
        """Record the CUDA allocator's history from now on (a CUDA finding was called)."""
        if self.cuda is not None:
            self.cuda.start_history(self.step)

    def walk_now(self, frame: FrameType | None) -> list[HolderSample]:
        """A holder walk whose samples are returned (and recorded): attach --walk, cleanup."""
        from torchleak.record.probes.holder_probes import holder_row

        if self.plan is None:
            return []
        samples = self.plan.walk.walker.walk(frame)
        self.out.add_rows("holders", [holder_row(self.step, s) for s in samples])
        self.out.add_rows("holder_walks", [(self.step, "full", "request", 0.0, len(samples))])
        return samples

    # step boundaries ---------------------------------------------------------------------
    def _optimizer_hook(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        """Every ``optimizer.step()`` (torch's global post hook). A sub-millisecond step
        pays for every call made here, and several times that again in its own code's
        caches, so the usual boundary is this method, ``_measure`` and nothing else."""
        if self._is_compiling():
            # Inside torch.compile this is all the compiler sees: no graph break, no
            # warning; the step is counted at run time by the call it puts in.
            self._mark_compiled(optimizer)
            return
        if self._in_child:
            return
        try:
            clock = self.clock
            key = id(optimizer)
            if key != clock.steady and not clock.observe(key, optimizer):
                return
            if self.sources.current != "optimizer":
                self.sources.switch("optimizer")
            # The program's frame (torch's step wrapper, two up) is taken only for a
            # probe: a frame object made at every step costs the step.
            self._measure(None, 2)
        except Exception as err:  # noqa: BLE001 - never raise into training
            self.out.disable("recorder", err)
        if self._requests:
            self._serve_requests(sys._getframe(1))

    def manual_step(self, frame: FrameType | None) -> None:
        if self._in_child:
            return
        self.clock.manual_step()
        if self.sources.current != "manual":
            self.sources.switch("manual")
        self.boundary(frame)

    def boundary(self, frame: FrameType | None) -> None:
        """One step boundary. Only a request's BaseException (a guard stop) leaves it."""
        try:
            self._measure(frame)
        except Exception as err:  # noqa: BLE001 - never raise into training
            self.out.disable("recorder", err)
        if self._requests:
            self._serve_requests(frame)

    def _measure(self, frame: FrameType | None, frame_above: int = 0) -> None:
        """Count and record one boundary; run the probes due. ``frame``: the program's
        frame, or None to take it ``frame_above`` frames up from here when a probe runs.

        Most boundaries of a fast loop read no memory and run no probe: they pay for two
        clock reads, a few comparisons and one appended row, nothing else (each call or
        object touched here costs a sub-millisecond step several times its own time, in
        caches the step had warm)."""
        start = _perf_counter()
        last = self._last_boundary
        self.step = step = self.step + 1
        plan = self.plan
        probes = plan is not None and (step >= plan.gate_step or start >= plan.gate_time) \
            and plan.due(step, start)
        cuda = self.cuda
        if cuda is not None and step >= cuda.next_step and (start >= cuda.next_time or probes):
            cuda.at_boundary(step, start)
        if probes or start >= self._memory_read_next:
            rss, uss = self._main.read()
            gen0: int | None = gc.get_count()[0]
            previous = self.latest  # the last reading, as framework loggers see it
            if previous is not None and previous[1] == rss and previous[2] == uss:
                self._memory_read_gap = min(2 * self._memory_read_gap, MEMORY_READ_MAX_SECONDS)
            else:
                self._memory_read_gap = MEMORY_READ_SECONDS
            # the first two steps both read: the run's memory before and after one step
            self._memory_read_next = start + self._memory_read_gap if step >= 2 else 0.0
            self._wall_offset = time.time() - start  # the wall clock, resynced
            self.latest = (step, rss, uss)
        else:
            rss = uss = gen0 = None
        if probes and plan is not None:
            if frame is None and frame_above:
                frame = sys._getframe(frame_above)
            self._collections_inside = 0.0
            plan.run(step, frame, start, start - last, self._run_probe)
            end = _perf_counter()
            # Our own time at this boundary, less the program's full collections that ran
            # inside a probe (``_run_probe``): neither ours nor the step's.
            own = end - start - self._collections_inside
            plan.scheduler.boundary_done(own)
        else:
            end = _perf_counter()
            own = end - start
        self._step_row((step, start + self._wall_offset, (start - last) * 1000.0, self.epoch,
                        self.phase, rss, uss, gen0, own * 1000.0))
        if step >= self.wake_step and self.wake is not None:
            self.wake_step = NEVER
            self.wake.set()
        # The next step's wall time excludes our own time at this boundary.
        self._last_boundary = end

    def _run_probe(self, probe: Probe, step: int, frame: FrameType | None,
                   reason: str) -> None:
        """Every scheduled probe runs here: timed, its time charged to its share of the
        budget, its rows written, and switched off (reported) the first time it fails."""
        if probe.name in self.out.off:
            return
        full_collections = gc.get_stats()[2]["collections"]
        start = time.perf_counter()
        try:
            probe.run(ProbeContext(step, frame, reason, self.out.emit, self.facts))
        except Exception as err:  # noqa: BLE001 - a failing probe is switched off, not raised
            self.out.disable(probe.name, err)
            return
        seconds = time.perf_counter() - start
        if gc.get_stats()[2]["collections"] != full_collections:
            # A full collection of the program's heap ran inside (~100 ms with torch loaded),
            # one the program pays under python too (the same time in full collections,
            # measured). Counted as the probe's cost it starved the next anchors.
            charged = min(seconds, self.scheduler.costs[probe.name].expected)
            self._collections_inside += seconds - charged
            seconds = charged
        self.scheduler.ran(probe.name, step, seconds)

    # marks ----------------------------------------------------------------------------------
    def mark(self, name: str, value: str | None = None) -> None:
        if self._in_child:
            return
        if name in ("epoch", "loader_epoch") or name.endswith("_end"):
            if self.plan is not None:
                self.plan.phase_end()  # per-epoch leaks show right after it ends
        if name == "epoch":
            self.epoch = (self.epoch or 0) + 1 if value is None else _epoch_number(value,
                                                                                  self.epoch)
        elif name.endswith("_start"):
            self.phase = name[: -len("_start")]
        elif name.endswith("_end"):
            self.phase = "train"
        self.writer.add("marks", (self.step, time.time(), name, value))

    @property
    def in_child(self) -> bool:
        """In a forked child (a DataLoader worker): never records."""
        return self._in_child


def _forked(ref: weakref.ref[Recorder]) -> None:
    recorder = ref()
    if recorder is not None:
        recorder._forked()


def _epoch_number(value: str, current: int | None) -> int:
    try:
        return int(float(value))
    except (TypeError, ValueError, OverflowError):
        return (current or 0) + 1


def _process_start(now_perf: float) -> float:
    """When this process started, on the perf_counter clock: under ``torchleak run`` the
    budget is a share of the run's whole wall time, start-up (importing torch) included."""
    try:
        age = max(0.0, time.time() - psutil.Process().create_time())
    except (psutil.Error, OSError):
        age = 0.0
    return now_perf - age
