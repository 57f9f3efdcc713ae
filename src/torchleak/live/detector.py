"""The live detector: the same analysis, run during training on what is recorded so far.

It runs on a thread of its own, reading the trace through its own read-only connection,
never on the training thread, and only the rows that are new since its last pass
(``RunDataBuilder``), so its memory stays bounded however long the run. Its timed
passes use at most ~0.3% of one core: after a pass that took ``c`` seconds it waits
``max(MIN_INTERVAL, c / SHARE)``. Passes also come as the run grows (``EARLY_STEPS``,
``STEP_GROWTH``, ``RECHECK_GROWTH``): a number logarithmic in the steps. A pass holds
the GIL for most of its few milliseconds, so the training thread waits that long; a run
of a few seconds paid ~25 of them in full (140 ms of CPU in a 3 s run of 3,000 steps).
So the passes stay within ``LIVE_BUDGETS`` times the overhead budget (3% at the default
``--budget`` of 1%) of the run's wall time so far (under ``torchleak run`` the process's, its
start-up included; in-process the monitor's), and one the share
cannot pay for yet waits until it can; except while a serious finding is suspected and
not called: those passes decide a live call (a late leak's comes near the end of a short
run, or never) and are counted apart. Each pass stores its judgement (the
``judgements`` row of phase 'live': the verdict, the report with its suspects, the calls)
so ``top``, ``ls`` and a ``report`` after a ``kill -9`` read the same truth, and a
``detection`` event the first time each finding fires.
"""

from __future__ import annotations

import math
import sqlite3
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from torchleak.analysis import RunDataBuilder, build_report
from torchleak.analysis.confirm import MIN_DOUBLING_STEPS
from torchleak.record.schedule import NEVER
from torchleak.report import Finding, Report, plain
from torchleak.trace.judgements import judgement_row
from torchleak.trace.reader import readonly_uri
from torchleak.trace.writer import TraceWriter
from torchleak.vocab import Verdict

MIN_INTERVAL = 2.0
SHARE = 0.003
# The passes, step-driven ones included and those re-checking a suspect aside, may take
# this many overhead budgets of the process's wall time in CPU time.
LIVE_BUDGETS = 3.0
NEXT_PASS = 1.5  # the next capped pass costs at most this many times the latest one
# What the first pass is taken to cost before one has run: a run in-process (its budget
# counted from the monitor's start, not the process's) would otherwise pay a whole pass
# in its first milliseconds, over the cap of a run a fraction of a second long.
FIRST_PASS_SECONDS = 0.01
TICK = 0.05  # how often the detector looks at the step count (a few microseconds each)
# Early passes at these steps, whatever the clock: a fast loop detected at step ~15 is
# warned about while it is still early, not two seconds (thousands of steps) later.
EARLY_STEPS = (16, 32, 64, 128, 256, 512)
# Passes also come each time the run grows by STEP_GROWTH, by RECHECK_GROWTH while a
# finding is suspected (at least RECHECK_MIN_STEPS steps): a call waits for an epoch end
# or a doubling of the run, and a fast loop makes thousands of steps between timed passes.
STEP_GROWTH = 1.25
RECHECK_GROWTH = 1.1
RECHECK_MIN_STEPS = 8

Listener = Callable[[Report, list[Finding]], None]  # (live report, newly fired findings)


class StepFeed(Protocol):
    """What wakes the detector at a step: the recorder sets ``wake`` at the first
    boundary whose step reaches ``wake_step`` (one comparison a step)."""

    wake_step: int
    wake: threading.Event | None


def finding_key(finding: Finding) -> str:
    return f"{finding.kind}:{finding.holder_path or finding.signal}"


class LiveDetector:
    def __init__(self, trace: Path, writer: TraceWriter, listener: Listener | None = None,
                 min_interval: float = MIN_INTERVAL,
                 current_step: Callable[[], int] = lambda: 0,
                 started: float | None = None, budget: float = 0.01,
                 feed: StepFeed | None = None) -> None:
        """``started``: when the process started, on the ``time.perf_counter`` clock (the
        share counts from there); ``budget``: the run's overhead budget (``--budget``);
        ``feed``: the recorder whose boundaries wake the detector at the steps it waits
        for (without one it looks at ``current_step`` every TICK)."""
        self._trace = trace
        self._writer = writer
        self._listener = listener
        self._min_interval = min_interval
        self._started = time.perf_counter() if started is None else started
        self._share = LIVE_BUDGETS * budget
        self.spent = 0.0  # CPU seconds of all passes so far
        self.deciding = 0.0  # ... of those that ran while a finding was suspected
        self.passes = 0
        self.deciding_passes = 0
        self._last_capped = FIRST_PASS_SECONDS  # CPU seconds of the latest pass the share held
        # A serious finding not called yet: its passes decide a live call and are not held
        # by the share (a late leak's call comes near the end of a short run, or not at all).
        self._suspecting = False
        self._builder = RunDataBuilder()
        self._conn: sqlite3.Connection | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="torchleak-detector",
                                        daemon=True)
        self._current_step = current_step
        self.first_fired: dict[str, int] = {}  # called findings: step of the call
        self.suspected: dict[str, int] = {}  # serious findings: step first suspected
        self.calls: list[LiveCall] = []
        self._recheck_at: float | None = None  # the step of the next look at suspects
        # Woken by the training thread's boundaries (``feed``): the thread sleeps until the
        # step it waits for instead of waking 20 times a second to look.
        self._wake = threading.Event()
        self._feed = feed
        if feed is not None:
            feed.wake = self._wake
        self.latest: Report | None = None
        self.failed: str | None = None

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout=10)
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def _loop(self) -> None:
        due = time.perf_counter() + self._min_interval
        early = list(EARLY_STEPS)
        held = False  # a pass is owed and waits for the share to pay for it
        while True:
            if not held:
                self._arm(early)
            # Each thread that wakes takes the GIL from the training thread at its next
            # release: sleep until a step or the clock calls for a pass.
            self._wake.wait(max(0.0, due - time.perf_counter())
                            if self._feed is not None or held else TICK)
            self._wake.clear()
            if self._stop.is_set():
                return
            step = self._current_step()
            crossed = bool(early) and step >= early[0]
            while early and step >= early[0]:
                early.pop(0)
            waiting = self._recheck_at is not None and step >= self._recheck_at
            now = time.perf_counter()
            if not held and not crossed and not waiting and now < due:
                continue
            affordable = self._affordable_at()
            if now < affordable and not self._suspecting:
                held, due = True, affordable
                self._wake_at(NEVER)  # no step wakes us before the share allows
                continue
            held = False
            spent = self.spent
            self.run_once()
            if self.failed:
                return
            due = time.perf_counter() + max(self._min_interval, (self.spent - spent) / SHARE)

    def _affordable_at(self) -> float:
        """When the capped passes' CPU so far, and the next one's, are within the share of
        the process's wall time: the share printed at the end is never over the cap it
        states (the passes that decide a call are outside it). The next pass is taken as
        NEXT_PASS times the latest: passes grow with the run."""
        return self._started + (self.spent - self.deciding
                                + NEXT_PASS * self._last_capped) / self._share

    def _arm(self, early: list[int]) -> None:
        steps = [s for s in (early[0] if early else None, self._recheck_at) if s is not None]
        self._wake_at(math.ceil(min(steps)) if steps else NEVER)

    def _wake_at(self, step: int) -> None:
        if self._feed is not None:
            self._feed.wake_step = step

    def run_once(self) -> Report | None:
        """One pass; a failure switches the detector off and is recorded, never raised."""
        cpu, suspecting = time.thread_time(), self._suspecting
        try:
            return self._pass()
        except Exception as err:  # noqa: BLE001
            self.failed = f"{type(err).__name__}: {err}"
            self._writer.add("events", (time.time(), 0, "probe_disabled", "live_detector",
                                        self.failed))
            return None
        finally:
            cost = time.thread_time() - cpu
            self.spent += cost
            self.passes += 1
            if suspecting:
                self.deciding += cost
                self.deciding_passes += 1
            else:
                self._last_capped = cost

    def cost(self) -> dict[str, float | int]:
        """What the passes cost, for the trace's metadata (``live_detector``)."""
        # The wall time the cap counted against (the process's, start-up included): a share
        # over the recorded span alone would read above the cap the passes kept to.
        return {"seconds": round(self.spent, 4), "passes": self.passes, "share": self._share,
                "deciding_seconds": round(self.deciding, 4),
                "deciding_passes": self.deciding_passes,
                "wall_seconds": round(time.perf_counter() - self._started, 3)}

    def _pass(self) -> Report | None:
        if self._conn is None:
            self._conn = sqlite3.connect(readonly_uri(self._trace), uri=True,
                                         check_same_thread=False, timeout=2.0)
        self._writer.flush()  # see every step up to now, not the last flush's
        data = self._builder.update(self._conn)
        if data.steps == 0:
            return None
        report = build_report(data, replay=False, live=True)
        if any(f.called and finding_key(f) not in self.first_fired for f in report.findings):
            # A first call: its step found as the final report will find it.
            report = build_report(data, replay=True, live=True)
        report.source = "live"
        fired = []
        for finding in report.findings:
            key = finding_key(finding)
            if finding.serious and key not in self.suspected:
                self.suspected[key] = data.steps
            if finding.serious and finding.called and key not in self.first_fired:
                self.first_fired[key] = data.steps
                self.calls.append(LiveCall(data.steps, finding.culprit, key, finding.called,
                                           finding.detected_at_step,
                                           finding.holder_path or finding.signal))
                fired.append(finding)
                self._writer.add("events", (time.time(), data.steps, "detection",
                                            "live_detector", finding.culprit))
            if key in self.first_fired and finding.serious:
                finding.called = finding.called or "called earlier in the run"
        _live_verdict(report, self.suspected)
        # Evidence comes with steps: look again as the run grows, sooner while a finding
        # is suspected (a fast loop may run for thousands of steps between timed passes).
        waiting = any(f.serious and not f.called for f in report.findings)
        self._suspecting = waiting
        self._recheck_at = _recheck_step(data.steps, RECHECK_GROWTH if waiting
                                         else STEP_GROWTH)
        self._writer.judge(judgement_row("live", data.steps, report.to_dict(), self.tier(),
                                         [plain(c) for c in self.calls], len(self.suspected)))
        if fired:
            self._writer.flush()  # a call is on disk before it is said: a kill -9 keeps it
        self.latest = report
        if self._listener is not None:
            self._listener(report, fired)
        return report

    def tier(self) -> str:
        """How far the live detector got: 'called', 'suspected' or 'none'."""
        return "called" if self.calls else "suspected" if self.suspected else "none"


def _recheck_step(steps: int, growth: float) -> float:
    """The next step-driven pass: the run grown by ``growth``, and never past the first
    step a call by doubling becomes possible."""
    step = max(steps + RECHECK_MIN_STEPS, steps * growth)
    first_call = 2 * MIN_DOUBLING_STEPS
    return first_call if steps < first_call < step else step


@dataclass
class LiveCall:
    """A leak the live detector called: when, who, and the evidence."""

    step: int
    culprit: str
    key: str
    why: str
    detected_at_step: int | None = None
    target: str = ""  # the holder path, or the signal when no holder is named


def _live_verdict(report: Report, suspected: dict[str, int]) -> None:
    """A live report's verdict rests on called findings only."""
    if report.called or report.verdict != Verdict.LEAK.value:
        return
    report.verdict = Verdict.NO_LEAK.value
    names = ", ".join(f.holder_path or f.signal for f in report.serious[:3])
    report.reason = (f"suspected, not called yet: {names} (growth warm-up could also "
                     "explain; a call waits for an epoch boundary or a doubling of the run)")
