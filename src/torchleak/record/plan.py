"""Which expensive probes run at a step boundary, and why.

The scheduler says what the budget and the anchors allow (``schedule.Scheduler``); the
plan adds what the run itself asks for: a walk right after an epoch or validation end,
a hunt when the process grows and no holder explains it (a few full walks, and the runs
a probe declares for it: ``Cost.hunt_runs``), and a confirmation of the holders the
live detector suspects (dense re-measures). The recorder runs what the plan picks
through its one ``run_probe``, which times each run and charges it to the budget.
"""

from __future__ import annotations

import bisect
import time
from collections.abc import Callable
from types import FrameType

from torchleak.record.probe import Probe
from torchleak.record.probes.holder_probes import HolderWalk, QuickRemeasure
from torchleak.record.schedule import ALL_ANCHORS, MAX_SUSPECTS, NEVER, Scheduler

# Walks owed to growth no holder explains, and their spacing: at least HUNT_MIN_GAP
# steps, or 1/HUNT_SPREAD of the steps so far (a slow leak needs time to show).
HUNT_WALKS, HUNT_MIN_GAP, HUNT_SPREAD = 3, 5, 40
# A hunt's other probes (``Cost.hunt_runs``: the census) are spaced like its walks (exact
# counts need no long gap, and a hunt late in a short run must end before the run does),
# and skipped when one would cost more than this (a heap of millions of objects).
HUNT_PROBE_CAP_SECONDS = 0.5
CONFIRM_SAMPLES = 4  # re-measures of suspected holders after each live look at them
CONFIRM_MIN_GAP, CONFIRM_SPREAD = 2, 40  # spaced by 2 steps or 1/40 of the steps so far

# Walks the run's events ask for (an epoch or validation end, a hunt, the run's end): they
# run whatever the budget (a healthy per-epoch list is seen emptied only by a walk right
# after the epoch), so they are a fixed cost beside the anchors, not the budget's share.
EVENT_WALKS = frozenset({"phase", "hunt", "end"})
# ... but a run of many short epochs (a small dataset trained for hundreds of epochs) made
# a walk at every one: 399 walks, 0.53 s, doubling a 0.8 s loop of 4-step epochs. The first
# PHASE_WALKS_FREE epoch ends always get theirs; later ones while the phase walks so far,
# and this one, stay within PHASE_BUDGETS budgets of the wall time so far.
PHASE_WALKS_FREE = 4
PHASE_BUDGETS = 1.0

RunProbe = Callable[[Probe, int, "FrameType | None", str], None]


class ProbePlan:
    def __init__(self, scheduler: Scheduler, walk: HolderWalk, probes: list[Probe],
                 disabled: set[str]) -> None:
        self.scheduler = scheduler
        self.walk = walk  # the holder walk and its quick re-measure
        self.quick = QuickRemeasure(walk)
        self.probes = probes  # the other scheduled probes (``probe.register``)
        self._disabled = disabled  # the recorder's: probes switched off after a failure
        for probe in (walk, self.quick, *probes):
            scheduler.add(probe.name, probe.cost)
        self.phase_changed = False  # a walk right after each epoch/validation end
        self.phase_walks = 0  # walks run at an epoch/validation end
        self.phase_seconds = 0.0  # ... their time
        self.phase_skipped = 0  # epoch/validation ends whose walk the share could not pay
        self._hunt_left = 0  # full walks still owed to growth no holder explains
        self._hunt_next = 0
        self._probe_hunts: dict[str, list[int]] = {}  # probe -> [runs owed, from step]
        self._confirming: list[str] = []  # holders the live detector suspects
        self._confirm_left = 0  # re-measures of them still owed
        self._confirm_next = 0
        # A boundary asks ``due`` only from gate_step or from gate_time on (one comparison
        # of each on most steps); what the run asks for opens the gate at once.
        self.gate_step = 0
        self.gate_time = 0.0
        self._asked = False  # asked for by another thread while ``due`` was deciding

    # what the run asks for (other threads) ---------------------------------------------
    def hunt(self) -> None:
        """The process grows and no holder explains it (a holder that began growing after
        the walks thinned out): a few full walks from the next boundary on, spaced so the
        grower shows growth between two of them, becomes a suspect and is then sampled
        densely by the quick re-measure. A handful of ~1-5 ms walks, whatever the budget;
        and the runs other probes declare for a hunt (two censuses), outside it too."""
        self._hunt_left, self._hunt_next = HUNT_WALKS, 0
        self._probe_hunts = {p.name: [p.cost.hunt_runs, 0] for p in self.probes
                             if p.cost.hunt_runs}
        self._open_gate()

    def confirm(self, paths: list[str]) -> None:
        """Holders the live detector suspects: re-measure them at the next few boundaries,
        spaced out, so whether they keep growing shows soon (~10-50 us a holder each, 0.5
        ms for a tensor's graph). Within the quick re-measure's share of the budget: asked
        for after every live pass, they took a short run over it (66 re-measures, 33 ms,
        in a 2 s run), and the live calls came at the same steps without them."""
        self._confirming = list(paths)[:MAX_SUSPECTS]
        self._confirm_left, self._confirm_next = CONFIRM_SAMPLES, 0
        self._open_gate()

    def phase_end(self) -> None:
        """An epoch or validation ended: a walk at the next boundary, if its share allows
        (decided here: a boundary opened for a walk it then skips costs a fast loop too)."""
        if "holders" in self._disabled:
            return
        if not self._affords_phase_walk(time.perf_counter()):
            self.phase_skipped += 1
            return
        self.phase_changed = True
        self._open_gate()

    def _open_gate(self) -> None:
        self._asked = True
        self.gate_step = 0

    # at a boundary (the training thread) -----------------------------------------------
    def due(self, step: int, start: float) -> bool:
        """Whether anything may run at this boundary; asked only once ``gate_step`` or
        ``gate_time`` is reached (the scheduler knows from which step, or from which time,
        anything can next run; the anchors, hunts and confirmations from which step)."""
        self._asked = False
        scheduler = self.scheduler
        found = bool(
            self.phase_changed or step in ALL_ANCHORS
            or ((step >= scheduler.next_step or start >= scheduler.next_due)
                and scheduler.ready(step, start))
            or (self._hunt_left and step >= self._hunt_next)
            or (self._probe_hunts and any(left and step >= first
                                          for left, first in self._probe_hunts.values()))
            or (self._confirm_left and step >= self._confirm_next))
        if found:
            self.gate_step = 0  # after the run, the next boundary decides again
            return True
        firsts = [scheduler.next_step, _next_anchor(step)]
        if self._hunt_left:
            firsts.append(self._hunt_next)
        firsts += [first for left, first in self._probe_hunts.values() if left]
        if self._confirm_left:
            firsts.append(self._confirm_next)
        self.gate_step, self.gate_time = max(step + 1, min(firsts)), scheduler.next_due
        if self._asked:  # a hunt or confirmation came in while deciding: look next time
            self.gate_step = 0
        return False

    def run(self, step: int, frame: FrameType | None, start: float, step_seconds: float,
            run_probe: RunProbe) -> None:
        """Run what is due now, each through ``run_probe``, then plan the next gate."""
        walk, quick = self.walk, self.quick
        # The quick re-measure's gap depends on the step's time (only read from here on).
        self.scheduler.step_seconds = step_seconds
        if "holders" not in self._disabled:
            reason = "phase" if self.phase_changed else (
                "hunt" if self._hunt_left and step >= self._hunt_next
                else self.scheduler.due("holders", step, start))
            if reason:
                self.phase_changed = False
                if reason == "hunt":
                    self._hunt_left -= 1
                    self._hunt_next = step + max(HUNT_MIN_GAP, step // HUNT_SPREAD)
                if reason in EVENT_WALKS:
                    self.scheduler.outside_budget(walk.name)
                spent = self.scheduler.costs[walk.name].spent
                run_probe(walk, step, frame, reason)
                if reason == "phase":
                    self.phase_walks += 1
                    self.phase_seconds += self.scheduler.costs[walk.name].spent - spent
            elif self._confirm_left and step >= self._confirm_next:
                self._confirm_left -= 1  # a sample the budget cannot pay for is skipped
                self._confirm_next = step + max(CONFIRM_MIN_GAP, step // CONFIRM_SPREAD)
                if self.scheduler.affords("quick", start):
                    quick.paths = self._confirming
                    run_probe(quick, step, frame, "confirm")
                    quick.paths = None
            elif walk.suspects and self.scheduler.due("quick", step, start):
                run_probe(quick, step, frame, "schedule")
        for probe in self.probes:
            if probe.name in self._disabled:
                continue
            if self._hunting(probe, step):
                self.scheduler.outside_budget(probe.name)
                run_probe(probe, step, frame, "hunt")
                continue
            reason = self.scheduler.due(probe.name, step, time.perf_counter(),
                                        probe.estimate)
            if reason:
                run_probe(probe, step, frame, reason)
        self.scheduler.plan(quick=bool(walk.suspects), step=step)

    def phase_summary(self) -> dict[str, float]:
        return {"runs": self.phase_walks, "seconds": round(self.phase_seconds, 4),
                "skipped": self.phase_skipped}

    def _affords_phase_walk(self, now: float) -> bool:
        if self.phase_walks < PHASE_WALKS_FREE:
            return True
        scheduler = self.scheduler
        expected = scheduler.costs[self.walk.name].expected
        return self.phase_seconds + expected <= \
            PHASE_BUDGETS * scheduler.budget * (now - scheduler.started)

    def end(self, step: int, run_probe: RunProbe) -> None:
        """The last walk, once the script has returned: module globals and registries
        outlive it, its locals do not. An event walk (``EVENT_WALKS``)."""
        self.scheduler.outside_budget(self.walk.name)
        run_probe(self.walk, step, None, "end")

    def _hunting(self, probe: Probe, step: int) -> bool:
        """Whether a hunt owes ``probe`` a run at this step (and it is affordable)."""
        owed = self._probe_hunts.get(probe.name)
        if not owed or not owed[0] or step < owed[1]:
            return False
        owed[0] -= 1
        owed[1] = step + max(HUNT_MIN_GAP, step // HUNT_SPREAD)
        estimate = probe.estimate()
        return (probe.cost.expected_seconds if estimate is None
                else estimate) <= HUNT_PROBE_CAP_SECONDS


_ANCHORS_SORTED = sorted(ALL_ANCHORS)


def _next_anchor(step: int) -> int:
    """The first anchor step after ``step``."""
    at = bisect.bisect_right(_ANCHORS_SORTED, step)
    return _ANCHORS_SORTED[at] if at < len(_ANCHORS_SORTED) else NEVER
