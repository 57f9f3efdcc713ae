"""The recording session: probes wired to step boundaries, writing one trace.

The training thread pays for: a clock read, one ``pread`` of ``/proc/self/statm``,
CUDA allocator stats when CUDA is initialised, a list append, and the expensive probes
only when the scheduler grants them. Everything else (children's USS/PSS, SQLite
writes, online detection) runs on two daemon threads.
"""

from __future__ import annotations

import gc
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

import psutil
from torch.optim.optimizer import register_optimizer_step_post_hook

from torchleak.analysis.online import OnlineDetector
from torchleak.record.phases import ModeWatcher
from torchleak.record.probes.census import take_census
from torchleak.record.probes.cuda import CudaProbe, cuda_available
from torchleak.record.probes.holders import HolderSample, HolderWalker
from torchleak.record.probes.process import ChildSampler, MainMemoryProbe
from torchleak.record.schedule import ALL_ANCHORS, Scheduler
from torchleak.record.steps import StepClock
from torchleak.trace.schema import STATUS_RUNNING
from torchleak.trace.writer import TraceWriter

_active: Recorder | None = None
MAX_SUSPECTS = 24


def active_recorder() -> Recorder | None:
    return _active


class Recorder:
    def __init__(self, trace_path: Path, metadata: dict[str, Any], budget: float = 0.01) -> None:
        self.writer = TraceWriter(trace_path)
        self.metadata = metadata
        self.clock = StepClock()
        self.scheduler = Scheduler(budget=budget)
        self.step = 0
        self.epoch: int | None = None
        self.phase = "train"
        self._main = MainMemoryProbe()
        self._cuda = CudaProbe()
        self._walker = HolderWalker()
        self._sampler = ChildSampler(self._emit_process, lambda: self.step)
        self._modes = ModeWatcher(self.mark)
        self._disabled: set[str] = set()
        self._hook: Any = None
        self._last_boundary = time.perf_counter()
        self._in_child = False
        self._suspects: list[str] = []
        self._phase_changed = False  # a walk right after each epoch/validation end
        self._last_sizes: dict[str, float] = {}
        self._cuda_on = cuda_available()  # fixed for the life of the process
        self._census_measured = False
        self._census_seconds_per_block = 1.5e-7  # measured ~0.08-0.2 µs; updated per census
        self.online = OnlineDetector(trace_path, self.writer.set_meta, self.event)
        self.writer.every_flush(self.online.maybe_run)

    # lifecycle -------------------------------------------------------------------------
    def start(self) -> None:
        global _active
        meta = dict(self.metadata, start_time=time.time(), status=STATUS_RUNNING,
                    step_definition="one optimizer step cycle (see torchleak.record.steps)")
        for key, value in meta.items():
            self.writer.set_meta(key, value)
        self.writer.flush()
        self.writer.start()
        self._sampler.start()
        self._modes.install()
        self._hook = register_optimizer_step_post_hook(self._on_optimizer_step)
        os.register_at_fork(after_in_child=self._forked)
        _active = self
        self._last_boundary = time.perf_counter()
        self.scheduler.started = _process_start(self._last_boundary)

    def stop(self, status: str, exit_code: int | None) -> None:
        """Unhook, take the end-of-run census, and write the final metadata."""
        global _active
        if _active is self:
            _active = None
        if self._hook is not None:
            self._hook.remove()
            self._hook = None
        self._modes.uninstall()
        self._sampler.stop()
        if self.step > 0:
            # Module globals and registries outlive the script; its locals do not.
            self._safely("holders", lambda: self._run_holders(self.step, None, "end"))
        if self._sampler.error is not None:
            self.event("probe_disabled", "process_sampler", repr(self._sampler.error))
        for key, value in {"status": status, "exit_code": exit_code, "end_time": time.time(),
                           "steps": self.step,
                           "monitor_seconds": round(self.scheduler.spent, 4),
                           "probe_costs": self.scheduler.summary(),
                           "probes_disabled": sorted(self._disabled)}.items():
            self.writer.set_meta(key, value)
        self.writer.stop_thread()
        self.writer.flush()

    def close(self) -> None:
        self.online.close()
        self._main.close()
        self.writer.close()

    def _forked(self) -> None:
        # DataLoader workers inherit us: they must never record into the parent's trace.
        self._in_child = True

    # step boundaries ---------------------------------------------------------------------
    def _on_optimizer_step(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        if self._in_child:
            return
        try:
            if self.clock.observe(id(optimizer)):
                self.boundary(sys._getframe(1))
        except Exception as err:  # noqa: BLE001 - never raise into training
            self._disable("recorder", err)

    def manual_step(self, frame: FrameType | None) -> None:
        if self._in_child:
            return
        self.clock.manual_step()
        try:
            self.boundary(frame)
        except Exception as err:  # noqa: BLE001
            self._disable("recorder", err)

    def boundary(self, frame: FrameType | None) -> None:
        start = time.perf_counter()
        duration_ms = (start - self._last_boundary) * 1000.0
        self.step += 1
        step = self.step
        rss, uss = self._main.read()
        if self._cuda_on and "cuda" not in self._disabled:
            self._safely("cuda", lambda: self._add_rows("cuda_samples", self._cuda.sample(step)))
        # One comparison on most steps: the scheduler knows when anything can next run.
        if self._phase_changed or step in ALL_ANCHORS or start >= self.scheduler.next_due:
            self._expensive_probes(step, frame, start)
        end = time.perf_counter()
        self.writer.add("steps", (step, time.time(), duration_ms, self.epoch, self.phase, rss,
                                  uss, None, gc.get_count()[0], (end - start) * 1000.0))
        # The next step's wall time excludes our own time at this boundary.
        self._last_boundary = end

    def _expensive_probes(self, step: int, frame: FrameType | None, start: float) -> None:
        if "holders" not in self._disabled:
            reason = "phase" if self._phase_changed else self.scheduler.due("holders", step, start)
            if reason:
                self._phase_changed = False
                self._safely("holders", lambda: self._run_holders(step, frame, reason))
            elif self._suspects and self.scheduler.due("quick", step, start):
                self._safely("holders", lambda: self._run_quick(step, frame))
        if "census" not in self._disabled:
            reason = self.scheduler.due("census", step, time.perf_counter(),
                                        self._census_estimate)
            if reason:
                self._safely("census", lambda: self._run_census(step, reason))
        self.scheduler.plan(quick=bool(self._suspects))

    def _add_rows(self, table: str, rows: list[tuple[Any, ...]]) -> None:
        for row in rows:
            self.writer.add(table, row)

    # expensive probes --------------------------------------------------------------------
    def _run_holders(self, step: int, frame: FrameType | None, reason: str) -> None:
        start = time.perf_counter()
        samples = self._walker.walk(frame)
        self._update_suspects(samples)
        self._add_rows("holders", [_holder_row(step, s) for s in samples])
        seconds = time.perf_counter() - start
        self.scheduler.ran("holders", step, seconds)
        self._add_rows("holder_walks", [(step, "full", reason, seconds * 1000, len(samples))])

    def _census_estimate(self) -> float:
        """Expected census cost: proportional to the Python heap (allocated blocks)."""
        return sys.getallocatedblocks() * self._census_seconds_per_block

    def _run_quick(self, step: int, frame: FrameType | None) -> None:
        start = time.perf_counter()
        samples = self._walker.remeasure(frame, self._suspects)
        self._add_rows("holders", [_holder_row(step, s) for s in samples])
        seconds = time.perf_counter() - start
        self.scheduler.ran("quick", step, seconds)
        self._add_rows("holder_walks", [(step, "quick", "schedule", seconds * 1000, len(samples))])

    def _update_suspects(self, samples: list[HolderSample]) -> None:
        """Holders that grew since the previous walk (or always can: hooks, caches)."""
        grown: dict[str, float] = {}
        seen_before = bool(self._last_sizes)
        for s in samples:
            size = float(s.graph_nodes or s.length)
            before = self._last_sizes.get(s.holder)
            if before is None and seen_before:
                before = 0.0  # new since the last walk: it grew from empty (a mid-run onset)
            if s.kind in ("hooks", "cache") or (before is not None and size > before):
                grown[s.holder] = size - (before or 0.0)
            elif s.holder in self._suspects and before is not None and size >= before:
                grown[s.holder] = 0.0
            self._last_sizes[s.holder] = size
        ranked = sorted(grown, key=grown.__getitem__, reverse=True)
        self._suspects = ranked[:MAX_SUSPECTS]

    def _run_census(self, step: int, reason: str) -> None:
        start = time.perf_counter()
        blocks = sys.getallocatedblocks()
        result = take_census()
        seconds = time.perf_counter() - start
        # The best rate seen: a census slowed by a busy machine must not cancel the next.
        rate = seconds / max(1, blocks)
        self._census_seconds_per_block = min(rate, self._census_seconds_per_block) if (
            self._census_measured) else rate
        self._census_measured = True
        self._add_rows("census", [(step, time.time(), seconds * 1000.0, reason, result.tensors,
                                   result.tensor_bytes, result.grad_fn_tensors,
                                   result.graph_nodes, result.graph_bytes, result.gc_objects)])
        self._add_rows("census_tensors", [(step, dev, dtype, n, b) for (dev, dtype), (n, b)
                                          in result.by_device_dtype.items()])
        self._add_rows("census_types", [(step, name, n) for name, n in result.top_types])
        self.scheduler.ran("census", step, seconds)

    # marks, events, failures ---------------------------------------------------------------
    def mark(self, name: str, value: str | None = None) -> None:
        if self._in_child:
            return
        if name == "epoch" or name.endswith("_end"):
            self._phase_changed = True  # per-epoch leaks show right after a phase ends
        if name == "epoch":
            self.epoch = (self.epoch or 0) + 1 if value is None else int(value)
        elif name.endswith("_start"):
            self.phase = name[: -len("_start")]
        elif name.endswith("_end"):
            self.phase = "train"
        self._add_rows("marks", [(self.step, time.time(), name, value)])

    def event(self, kind: str, source: str, message: str) -> None:
        self._add_rows("events", [(time.time(), self.step, kind, source, message)])

    def _safely(self, probe: str, action: Callable[[], None]) -> None:
        try:
            action()
        except Exception as err:  # noqa: BLE001 - a failing probe is switched off, not raised
            self._disable(probe, err)

    def _disable(self, probe: str, err: BaseException) -> None:
        if probe not in self._disabled:
            self._disabled.add(probe)
            self.event("probe_disabled", probe, f"{type(err).__name__}: {err}")

    def _emit_process(self, step: int, t: float, pid: int, role: str, rss: int, uss: int,
                      pss: int) -> None:
        self._add_rows("process_samples", [(step, t, pid, role, rss, uss, pss)])


def _process_start(now_perf: float) -> float:
    """When this process started, on the perf_counter clock: the budget is a share of the
    run's whole wall time, start-up (importing torch) included."""
    try:
        age = max(0.0, time.time() - psutil.Process().create_time())
    except (psutil.Error, OSError):
        age = 0.0
    return now_perf - age


def _holder_row(step: int, s: HolderSample) -> tuple[Any, ...]:
    return (step, s.holder, s.kind, s.type_name, s.length, s.bytes, s.tensors, s.tensor_bytes,
            s.grad_fn_tensors, s.graph_nodes, json.dumps(s.detail, default=str) if s.detail else None)
