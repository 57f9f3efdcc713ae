"""The OOM guard: act before the kernel kills the run.

A thread of its own reads, every ``POLL_SECONDS``, the memory the limit is enforced on:
the cgroup's working set (usage less inactive file pages) when the limit is a cgroup's,
else the process's private memory (one ``pread`` of ``/proc/self/statm``) plus the
workers' latest USS; the guard line prints that same figure. It fires when that memory
passes ``share`` of the limit, or when a leak the live detector has *called* would reach
the limit within ``minutes`` and within ``TRUSTED_REACH`` times the steps already watched
(a line fitted to 80 steps says little about step 800,000), and the guard's own reading
has grown since the call at ``CONFIRM_PACE`` of the projected rate (memory that levels
off below the limit is never acted on by a projection). Firing, once per run:
- takes a diagnosis snapshot into the trace at the next step boundary (holder walk and
  census), so a later ``kill -9`` loses nothing;
- ``checkpoint`` and ``stop``: runs the user's ``on_guard`` callbacks on the training
  thread at that boundary (the model and optimizer are consistent there);
- ``stop``: then ends the training from the training thread with ``GuardStop`` (exit code
  ``EXIT_GUARD``), or through the framework's own stop flag when a callback owns the loop;
  when the training runs on another thread, the main thread gets ``GuardStop`` too (at
  its next bytecode), so the program ends with 75 instead of carrying on.
The training thread pays one check of the recorder's request queue per step.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from types import FrameType
from typing import Any

from torchleak.errors import EXIT_GUARD
from torchleak.live.callbacks import GuardEvent, guard_callbacks
from torchleak.record.probes.process import MainMemoryProbe
from torchleak.record.session import Recorder

GUARD_MODES = ("warn", "checkpoint", "stop")
POLL_SECONDS = 0.05
TRUSTED_REACH = 10.0  # a projection acts only this many times past the steps it has seen
CONFIRM_PACE = 0.5  # the guard's own reading grew at this share of the projected rate
CONFIRM_STEPS = 10  # ... over at least this many steps since the leak was called


class GuardStop(SystemExit):
    """Raised at a step boundary to end training cleanly before the memory limit."""

    def __init__(self) -> None:
        super().__init__(EXIT_GUARD)


@dataclass
class GuardSettings:
    mode: str = "warn"
    share: float = 0.90  # fire when memory passes this share of the limit
    minutes: float = 10.0  # ... or when the limit is projected within this many minutes


class Guard:
    def __init__(self, settings: GuardSettings, limit_bytes: int, limit_name: str,
                 recorder: Recorder, run_folder: str,
                 workers_uss: Callable[[], int],
                 live_projection: Callable[[], tuple[float | None, Any]],
                 on_fire: Callable[[GuardEvent], None],
                 stopper: Callable[[], None] | None = None,
                 counted: Callable[[], int | None] | None = None) -> None:
        self.settings = settings
        self.limit_bytes = limit_bytes
        self.limit_name = limit_name
        self._recorder = recorder
        self._run_folder = run_folder
        self._workers_uss = workers_uss
        self._projection = live_projection
        self._on_fire = on_fire
        self._stopper = stopper
        self._probe = MainMemoryProbe()
        self._counted = counted  # what the limit counts, when not the process (a cgroup)
        self._readings: dict[int, int] = {}  # step -> the first reading at that step
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="torchleak-guard", daemon=True)
        self.fired: GuardEvent | None = None
        self.peak_bytes = 0

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout=2)
        self._probe.close()

    def set_stopper(self, stopper: Callable[[], None] | None) -> None:
        """How ``stop`` ends the training: a framework's own flag, or GuardStop."""
        self._stopper = stopper

    def memory(self) -> int:
        """The memory the limit is enforced on, now."""
        if self._counted is not None:
            counted = self._counted()
            if counted is not None:
                return counted
        _rss, private = self._probe.read()
        return private + self._workers_uss()

    def _loop(self) -> None:
        while not self._stop.wait(POLL_SECONDS):
            try:
                if self.check():
                    return
            except Exception:  # noqa: BLE001 - the guard never takes the run down
                return

    def check(self) -> bool:
        """One look at memory; True once the guard has fired."""
        if self.limit_bytes <= 0:
            return False  # no limit known: nothing to guard against
        used = self.memory()
        self.peak_bytes = max(self.peak_bytes, used)
        step = self._recorder.step
        self._readings.setdefault(step, used)
        if len(self._readings) > 4096:
            for old in list(self._readings)[:2048]:
                del self._readings[old]
        reason = None
        seconds, finding = None, None
        if used >= self.settings.share * self.limit_bytes:
            reason = "limit"
        else:
            seconds, finding = self._projection()
            if seconds is not None and seconds <= self.settings.minutes * 60 \
                    and _within_reach(finding) and self._confirmed(finding, step, used):
                reason = "projection"
        if reason is None:
            return False
        if seconds is None:
            seconds, finding = self._projection()
        self.fire(reason, used, seconds, finding)
        return True

    def _confirmed(self, finding: Any, step: int, used: int) -> bool:
        """The projection holds on the guard's own reading: it grew since the leak was
        called at ``CONFIRM_PACE`` of the rate the projection uses."""
        oom = getattr(finding, "oom", None)
        rate = getattr(oom, "bytes_per_step", None)
        since = getattr(oom, "at_step", None)
        if not isinstance(rate, (int, float)) or rate <= 0 or not isinstance(since, int):
            return False
        earlier = [s for s in self._readings if s <= since]
        if not earlier or step - max(earlier) < CONFIRM_STEPS:
            return False
        start = max(earlier)
        return used - self._readings[start] >= CONFIRM_PACE * rate * (step - start)

    def fire(self, reason: str, used: int, seconds: float | None, finding: Any) -> None:
        event = GuardEvent(reason=reason, mode=self.settings.mode, step=self._recorder.step,
                           memory_bytes=used, limit_bytes=self.limit_bytes,
                           limit_name=self.limit_name, seconds_to_limit=seconds,
                           run_folder=self._run_folder, finding=finding)
        self.fired = event
        self._on_fire(event)
        self._recorder.request(lambda frame: self._act(event, frame))

    def _act(self, event: GuardEvent, frame: FrameType | None) -> None:
        """On the training thread, at the boundary after firing."""
        self._recorder.snapshot(frame, "guard")
        event.actions.append("snapshot")
        if event.mode in ("checkpoint", "stop"):
            for callback in guard_callbacks():
                try:
                    callback(event)
                    event.actions.append(f"called {getattr(callback, '__qualname__', 'on_guard')}")
                except Exception as err:  # noqa: BLE001 - a failing checkpoint is reported
                    event.actions.append(f"on_guard failed: {type(err).__name__}: {err}")
                    self._recorder.out.event("guard", "on_guard", f"{type(err).__name__}: {err}")
        self._recorder.out.event("guard", event.mode, ", ".join(event.actions))
        if event.mode == "stop":
            event.actions.append("stopped")
            if self._stopper is not None:
                self._stopper()
            else:
                _stop_main_thread()
                raise GuardStop()

    def summary(self) -> dict[str, Any] | None:
        event = self.fired
        if event is None:
            return None
        return {"mode": event.mode, "reason": event.reason, "step": event.step,
                "memory_bytes": event.memory_bytes, "limit_bytes": event.limit_bytes,
                "limit_name": event.limit_name, "seconds_to_limit": event.seconds_to_limit,
                "actions": list(event.actions), "at": time.time()}


def _stop_main_thread() -> None:
    """Training on another thread: the main thread must not carry on as if it had
    finished. It gets GuardStop at its next bytecode (a ``join()`` returns first)."""
    main = threading.main_thread()
    if threading.current_thread() is main or not main.is_alive() or main.ident is None:
        return
    import ctypes

    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(main.ident),
                                               ctypes.py_object(GuardStop))


def _within_reach(finding: Any) -> bool:
    """The projection extrapolates no further than ``TRUSTED_REACH`` times the run so far."""
    oom = getattr(finding, "oom", None)
    steps, seen = getattr(oom, "steps_to_oom", None), getattr(oom, "at_step", None)
    if not isinstance(steps, (int, float)) or not isinstance(seen, (int, float)):
        return True
    return steps <= TRUSTED_REACH * max(seen, 1)
