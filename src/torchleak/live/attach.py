"""What a framework callback (Lightning, Hugging Face) needs from the one engine.

A ``FrameworkRun`` starts a monitor for one ``fit``/``train`` call, or uses the one that
already records the process (``torchleak run`` with the callback in the script), and
gives the callback: the newest memory scalars for the trainer's loggers, the findings not
yet sent, the guard's pending action, and the end-of-run summary (on rank 0 only; under
several ranks it covers every rank's trace in the shared run folder).
"""

from __future__ import annotations

import atexit
from collections.abc import Callable
from typing import Any

from torchleak.live.callbacks import GuardEvent
from torchleak.live.detector import finding_key
from torchleak.live.engine import Monitor, run_folder
from torchleak.live.inprocess import InProcessMonitor, safe_options, warn
from torchleak.report import Finding, Report
from torchleak.vocab import RunStatus

MIB = float(1 << 20)
PREFIX = "torchleak/"
Broadcast = Callable[[str], str]  # rank 0's value, on every rank


class FrameworkRun:
    def __init__(self, options: dict[str, Any], where: str) -> None:
        self._options = dict(options)
        self._where = where
        self.monitor: Monitor | None = None
        self.owned = False  # False: another entry point (torchleak run) owns the monitor
        self.rank: int | None = None
        self.world = 1
        self.report: Report | None = None
        self._sent: set[str] = set()
        self._census_step = -1
        self._guard_handled = False
        self._runs = 0  # runs started by this callback (each fit/validate/test call)

    @property
    def active(self) -> bool:
        return self.monitor is not None and self.monitor.recorder is not None

    def start(self, name: str, rank: int | None = None, world: int = 1,
              broadcast: Broadcast | None = None) -> None:
        """Record from now on; never raises (a failure is one warning)."""
        self.rank, self.world = (rank if world > 1 else None), max(1, world)
        try:
            self._start(name, broadcast)
        except Exception as err:  # noqa: BLE001 - the training goes on unrecorded
            warn(f"{self._where}: not recording ({type(err).__name__}: {err})")
            self.monitor = None

    def _start(self, name: str, broadcast: Broadcast | None) -> None:
        from torchleak.live.engine import active_monitor

        self._sent.clear()
        self._guard_handled = False
        active = active_monitor()
        if active is not None:
            self.monitor, self.owned = active, False
            return
        options = safe_options(dict({"name": name}, **self._options), self._where)
        options.rank, options.world_size = self.rank, self.world
        self._runs += 1
        if options.out and self._runs > 1:  # a later fit/test call of the same trainer
            options.out = f"{options.out}-{self._runs}"
        if self.world > 1:
            options.quiet = options.quiet or self.rank != 0  # rank 0 speaks for the run
            base = options.out or run_folder(_without_rank(options), name)
            options.out = broadcast(str(base)) if broadcast is not None else str(base)
        monitor = InProcessMonitor(options)
        monitor.start()
        if monitor.running:
            self.monitor, self.owned = monitor, True

    # while training ---------------------------------------------------------------------
    def metrics(self) -> dict[str, float]:
        """The newest memory scalars: main process, workers, CUDA, tensors, leaks called."""
        monitor = self.monitor
        recorder = monitor.recorder if monitor is not None else None
        if monitor is None or recorder is None or recorder.latest is None:
            return {}
        _step, rss, uss = recorder.latest
        out = {f"{PREFIX}main_rss_mib": rss / MIB, f"{PREFIX}main_uss_mib": uss / MIB}
        workers = recorder.facts.workers_uss
        if workers:
            out[f"{PREFIX}workers_uss_mib"] = workers / MIB
        out.update(_cuda_scalars())
        census = recorder.facts.latest_census
        if census is not None and census[0] != self._census_step:
            self._census_step = census[0]
            out[f"{PREFIX}tensors"] = float(census[1])
            out[f"{PREFIX}tensor_mib"] = census[2] / MIB
        # The leaks the live detector has called (what it prints), never the ones it only
        # suspects: a logged leak is one the end of the run would keep.
        # Before its first pass (in-process it waits until the run has paid for one) it
        # has called none: the count is 0 from the first entry, not missing.
        live = monitor.live_report
        called = live.called if live is not None else []
        out[f"{PREFIX}leaks"] = float(len(called))
        out[f"{PREFIX}leak_kib_per_step"] = sum(f.bytes_per_step or 0.0 for f in called) / 1024
        return out

    def new_findings(self) -> list[Finding]:
        """Live findings called (as printed) and not handed out before."""
        live = self.monitor.live_report if self.monitor is not None else None
        fresh = []
        for finding in live.called if live is not None else []:
            key = finding_key(finding)
            if key not in self._sent:
                self._sent.add(key)
                fresh.append(finding)
        return fresh

    def guard_action(self) -> GuardEvent | None:
        """The guard's event once it fired in checkpoint or stop mode, handed out once."""
        guard = self.monitor.guard if self.monitor is not None else None
        event = guard.fired if guard is not None else None
        if event is None or self._guard_handled or event.mode == "warn":
            return None
        self._guard_handled = True
        return event

    def set_stopper(self, stopper: Callable[[], None]) -> None:
        """The guard's stop mode ends the training through the framework's own flag."""
        guard = self.monitor.guard if self.monitor is not None else None
        if guard is not None:
            guard.set_stopper(stopper)

    def event(self, kind: str, message: str) -> None:
        recorder = self.monitor.recorder if self.monitor is not None else None
        if recorder is not None:
            recorder.out.event(kind, self._where, message)

    def mark(self, name: str, value: object = None) -> None:
        recorder = self.monitor.recorder if self.monitor is not None else None
        if recorder is not None:
            try:
                recorder.mark(name, None if value is None else str(value))
            except Exception:  # noqa: BLE001 - a mark is never worth an error
                pass

    # the end ------------------------------------------------------------------------------
    def stop(self, crashed: bool = False, barrier: Callable[[], None] | None = None
             ) -> Report | None:
        """End the run this callback started (not one it joined); rank 0 prints the
        summary, of every rank under several."""
        monitor, self.monitor = self.monitor, None
        if monitor is None or not self.owned:
            return None
        status = RunStatus.CRASHED.value if crashed else RunStatus.FINISHED.value
        atexit.unregister(getattr(monitor, "_at_exit", _safely))
        report = Monitor.stop(monitor, status, 1 if crashed else 0)  # its summary is ours
        self.report = report
        if self.world > 1 and barrier is not None:
            _safely(barrier)
        if self.rank in (None, 0) and not monitor.options.quiet:
            shown, trace = report, monitor.trace
            if self.world > 1 and monitor.folder is not None:
                from torchleak.live.ranks import run_summary

                shown = run_summary(monitor.folder.parent, self.world) or report
                trace = monitor.folder.parent / "rank0" / "trace.sqlite"
            if shown is not None:
                from torchleak.views.summary import format_summary

                monitor.say(format_summary(shown, trace))
        return report


def _without_rank(options: Any) -> Any:
    import dataclasses

    return dataclasses.replace(options, rank=None, world_size=1)


def _cuda_scalars() -> dict[str, float]:
    import torch

    if not torch.cuda.is_available() or not torch.cuda.is_initialized():
        return {}
    try:
        return {f"{PREFIX}cuda_allocated_mib": torch.cuda.memory_allocated() / MIB,
                f"{PREFIX}cuda_reserved_mib": torch.cuda.memory_reserved() / MIB}
    except Exception:  # noqa: BLE001 - a CUDA error is not ours to raise
        return {}


def _safely(action: Callable[[], None]) -> None:
    try:
        action()
    except Exception:  # noqa: BLE001 - a failed barrier only costs the all-ranks summary
        pass


def finding_text(finding: Finding) -> str:
    """One finding as a logger's text entry."""
    from torchleak.views.summary import finding_lines

    return "\n".join(line.strip() for line in finding_lines(finding))
