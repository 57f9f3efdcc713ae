"""When to run the expensive probes: an overhead budget with anchors.

Every probe's cost is measured as it runs. A probe may run at a boundary when the time
spent on expensive probes so far, plus its expected cost, stays within ``budget`` times
the wall time since monitoring started. The holder walk is cheap (~1-5 ms) and is what
names leaks, and re-measuring the suspects it found (holders that grew between walks,
~10-50 µs each) samples them densely, spread out so it never costs more than 1% of
the steps between its runs (3% made it a sub-millisecond loop's largest cost while the
start-up's budget lasted): 45% and 42% of the budget; the full census
(~50-250 ms) gets 10% beyond its anchors. Each probe declares its share (``probe.Cost``).
Anchors: an early step (after the optimizer's lazy state exists), after warm-up, then
at every doubling of the step count (the holder walk's at every x1.5). The early anchors
and the holder walk's are a fixed cost outside the budget, paid for by the run's own
length: together they spend at most ``ANCHOR_BUDGETS`` times the budget (1.5% by
default) of the run's wall time so far (under ``torchleak run`` the process's, importing
torch included; in-process, from the monitor's start). The walk's
anchors (cheap, and what names a leak) run at their steps whatever the clock, so a
loaded machine never changes what a run sees; a census anchor that does not fit yet is
owed and runs as soon as the run has lasted long enough, so a short run pays its walks
and no census, a long one every anchor on time. A later census anchor must fit the
budget (outside it, each census's transient scan left free heap that a short run's leak
then filled without raising USS).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from torchleak.record.probe import Cost

# Census anchors: early (optimizer state exists), after warm-up, then every doubling, so
# the last census is never older than half the run (the true last step is unknown until
# the script returns, and by then its locals are gone).
ANCHOR_STEPS = frozenset({3, 50} | {50 * 2**k for k in range(1, 24)})
# The holder walk also runs at geometrically spaced steps (x1.5): a handful of cheap
# walks (log of the run length) that give even very fast loops enough early samples to
# detect growth within tens of steps.
HOLDER_GROWTH = 1.5


def _geometric(first: int = 3, limit: int = 10**9) -> frozenset[int]:
    steps, s = set(), float(first)
    while s < limit:
        steps.add(int(s))
        s = max(s + 1, s * HOLDER_GROWTH)
    return frozenset(steps)


HOLDER_ANCHORS = _geometric()
ALL_ANCHORS = HOLDER_ANCHORS | ANCHOR_STEPS
SAMPLES_PER_SERIES = 400
EARLY_ANCHOR_LIMIT = 50  # anchors up to here are a fixed cost (within ANCHOR_BUDGETS)
ANCHOR_BUDGETS = 1.5  # the fixed anchors may spend this many budgets of the wall time so far
WALK_CAP_SECONDS, WALK_CAP_SHARE = 0.3, 0.03  # ... but a walk anchor runs unless dearer
QUICK_STEP_SHARE = 0.01
MAX_SUSPECTS = 24  # holders the quick re-measure follows
NEVER = 2**62  # a step no run reaches


@dataclass
class ProbeCost:
    expected: float  # seconds, updated from measurements
    spent: float = 0.0
    runs: int = 0

    def record(self, seconds: float) -> None:
        self.runs += 1
        self.spent += seconds
        # Smoothed, biased towards the latest cost so growth in walk time is tracked.
        self.expected = seconds if self.runs == 1 else 0.5 * self.expected + 0.5 * seconds


@dataclass
class Scheduler:
    budget: float  # fraction of wall time, e.g. 0.01
    started: float = field(default_factory=time.perf_counter)
    # Per probe, from its declared ``Cost`` (``add``): its share of the budget, its cost
    # so far and expected, its minimum gap in steps, whether it runs at anchors.
    share: dict[str, float] = field(default_factory=dict)
    costs: dict[str, ProbeCost] = field(default_factory=dict)
    min_gap_steps: dict[str, int] = field(default_factory=dict)
    anchored: set[str] = field(default_factory=set)
    last_step: dict[str, int] = field(default_factory=dict)
    owed: set[str] = field(default_factory=set)  # fixed anchors the run's length has not paid yet
    _fixed_now: set[str] = field(default_factory=set)  # due() said: a fixed anchor, now
    _hunt_now: set[str] = field(default_factory=set)  # a hunt's run, outside the budget

    def add(self, probe: str, cost: Cost) -> None:
        """A probe's declared cost: from now on ``due`` and ``plan`` consider it."""
        self.share[probe] = cost.share
        self.costs[probe] = ProbeCost(cost.expected_seconds)
        self.min_gap_steps[probe] = cost.min_gap_steps
        if cost.anchored:
            self.anchored.add(probe)

    def due(self, probe: str, step: int, now: float | None = None,
            estimate: Callable[[], float | None] | None = None) -> str | None:
        """The reason to run ``probe`` at ``step`` now, or None.

        ``estimate`` re-estimates the cost (the census scales with the heap); it is only
        called when the probe may run, since estimating has a cost of its own."""
        now = time.perf_counter() if now is None else now
        cost = self.costs[probe]
        anchor = probe in self.anchored and (
            step in ANCHOR_STEPS or (probe == "holders" and step in HOLDER_ANCHORS))
        fixed = anchor and (step <= EARLY_ANCHOR_LIMIT or probe == "holders")
        if probe in self.owed and not fixed and step - self.last_step.get(probe, -10**9) >= \
                self.min_gap_steps[probe]:
            fixed = anchor = True  # an earlier anchor, now that the run pays for it
        # Long runs: spread samples out so a series keeps a few hundred points, not 10^5
        # (tested first: the estimate below has a cost of its own).
        gap = self._gap(probe, step)
        if not anchor and step - self.last_step.get(probe, -10**9) < gap:
            return None
        if fixed and probe == "holders":
            # The walk's anchors run at their steps whatever the clock: ~1-5 ms each, a few
            # dozen in a million steps, and what names a leak; a verdict must not depend on
            # how loaded the machine was. Only a walk of a huge heap waits.
            if cost.expected <= WALK_CAP_SECONDS + WALK_CAP_SHARE * (now - self.started):
                self._fixed_now.add(probe)
                return "anchor"
            return None
        room = self.anchor_share * (now - self.started) - self.anchor_spent
        if fixed and cost.expected > room:
            # Not before the estimate: a census owed through a short run would take one
            # (sys.getallocatedblocks(), ~0.1-0.3 ms) at every boundary a gate opens.
            self.owed.add(probe)
            return None
        if estimate is not None and (anchor or self.affords(probe, now)):
            fresh = estimate()  # None: the probe keeps its measured cost
            cost.expected = cost.expected if fresh is None else fresh
        if fixed:
            # An early (census) anchor is outside the budget: a fixed cost the run's length
            # pays for. One that does not fit yet (a census on a heap of millions of
            # objects, any census in a run of a few seconds) is owed.
            if cost.expected <= room:
                self.owed.discard(probe)
                self._fixed_now.add(probe)
                return "anchor"
            self.owed.add(probe)
            return None
        if anchor:
            # Later anchors go before scheduled runs but stay within the whole budget
            # (early anchors are the budget's fixed start-up cost and not charged here).
            fits = self.spent - self.early_spent + cost.expected <= self.budget * (now - self.started)
            return "anchor" if fits else None
        return "schedule" if self.affords(probe, now) else None

    # A boundary checks the probes when it reaches next_step or next_due (see _split).
    next_due: float = 0.0
    next_step: int = 0

    early_spent: float = 0.0  # time of the runs outside the budget: fixed anchors, event walks, hunts
    anchor_spent: float = 0.0  # ... the fixed anchors' part: what ANCHOR_BUDGETS bounds
    early_by_probe: dict[str, float] = field(default_factory=dict)

    def ran(self, probe: str, step: int, seconds: float) -> None:
        self.costs[probe].record(seconds)
        self._ran_seconds += seconds
        self.last_step[probe] = step
        fixed, hunt = probe in self._fixed_now, probe in self._hunt_now
        if fixed:  # a fixed anchor (``due``): outside the budget, within the anchors' share
            self._fixed_now.discard(probe)
            self.anchor_spent += seconds
        if hunt:  # asked for by the run (``outside_budget``): never eats the anchors' share
            self._hunt_now.discard(probe)
        if fixed or hunt:
            self.early_spent += seconds
            self.early_by_probe[probe] = self.early_by_probe.get(probe, 0.0) + seconds

    def _allowance(self, probe: str, now: float) -> float:
        """What ``probe`` may have spent by ``now``: its share of the budget, its early
        anchors not charged to it."""
        return self.budget * self.share[probe] * (now - self.started) + self.early_of(probe)

    def affords(self, probe: str, now: float) -> bool:
        """Whether one more run of ``probe`` stays within its share of the budget."""
        cost = self.costs[probe]
        return cost.spent + cost.expected <= self._allowance(probe, now)

    def outside_budget(self, probe: str) -> None:
        """The next run of ``probe`` is a fixed cost, not charged to its share nor to the
        anchors' (a hunt's census would otherwise leave a short run no room for walks)."""
        self._hunt_now.add(probe)

    @property
    def anchor_share(self) -> float:
        return ANCHOR_BUDGETS * self.budget

    def early_of(self, probe: str) -> float:
        return self.early_by_probe.get(probe, 0.0)

    def plan(self, quick: bool, step: int, now: float | None = None) -> None:
        """When the budget next allows any probe, and from which step its gap does (quick
        only when there are suspects): most boundaries then cost two comparisons."""
        # An owed probe runs only as the anchor it owes (``due``): its budget's gate would
        # open boundaries that then refuse it, one after the other.
        probes = [p for p in self.costs if (quick or p != "quick") and p not in self.owed]
        self.gates = [(self.started + (self.costs[p].spent - self.early_of(p)
                                       + self.costs[p].expected) / (self.budget * self.share[p]),
                       self.last_step.get(p, -10**9) + self._gap(p, step)) for p in probes]
        # An owed anchor: from when the run's length pays for it.
        self.gates += [(self._owed_until(p), self.last_step.get(p, -10**9) + self.min_gap_steps[p])
                       for p in self.owed]
        self._split(time.perf_counter() if now is None else now)

    gates: list[tuple[float, int]] = field(default_factory=list)  # per probe: (time, step)

    def _owed_until(self, probe: str) -> float:
        """When the run's length pays for an owed anchor of ``probe`` (``due``'s room)."""
        return self.started + (self.anchor_spent + self.costs[probe].expected) / self.anchor_share

    def _split(self, now: float) -> None:
        """The two numbers a boundary compares with (either passed opens the gate): the
        first step of the probes whose time has come, the first time of the others. A
        probe can only run once one of them is passed, so most boundaries stop there."""
        self.next_step = min((first for due, first in self.gates if due <= now),
                             default=NEVER)
        self.next_due = min((due for due, _ in self.gates if due > now), default=math.inf)

    def ready(self, step: int, now: float) -> bool:
        """Whether some probe's budget and gap both allow it now; if none, the gate is
        narrowed for the boundaries that follow."""
        if not self.gates or any(now >= due and step >= first for due, first in self.gates):
            return True
        self._split(now)
        return False

    step_seconds: float = 0.0  # the latest step's wall time, set before probes are planned
    # A boundary that runs a probe also pays for choosing it (the gates, the other probes'
    # checks, the memory read it forces): ~20 us, twice a quick re-measure of one suspect.
    # Charged to the re-measure's spacing (it runs at most boundaries of a fast loop), the
    # 3% it may cost is what it does cost.
    plan_overhead: float = 0.0
    _ran_seconds: float = 0.0  # the probes' own seconds at the current boundary

    def boundary_done(self, seconds: float) -> None:
        """A boundary that looked at the probes took ``seconds`` of our time in all.

        Only one where a probe ran is the choosing's price: counting a look that ran
        nothing widened the re-measure's gap past the step its gate had opened at, so the
        next boundary looked again in vain, and so on at every boundary."""
        if self._ran_seconds > 0:
            overhead = max(0.0, seconds - self._ran_seconds)
            self.plan_overhead = overhead if not self.plan_overhead else \
                0.5 * self.plan_overhead + 0.5 * overhead
        self._ran_seconds = 0.0

    def _gap(self, probe: str, step: int) -> int:
        """Steps between two runs of ``probe``: its minimum, wider on long runs, and for
        the quick re-measure wide enough that it costs at most QUICK_STEP_SHARE of the
        steps it spreads over (on a fast loop it would otherwise run at most boundaries)."""
        gap = max(self.min_gap_steps[probe], step // SAMPLES_PER_SERIES)
        if probe == "quick" and self.step_seconds > 0:
            spread = (self.costs[probe].expected + self.plan_overhead) / (
                QUICK_STEP_SHARE * self.step_seconds)
            gap = max(gap, math.ceil(spread))
        return gap

    @property
    def spent(self) -> float:
        return sum(c.spent for c in self.costs.values())

    def summary(self) -> dict[str, dict[str, float]]:
        return {name: {"runs": c.runs, "seconds": round(c.spent, 4),
                       "mean_ms": round(1000 * c.spent / c.runs, 3) if c.runs else 0.0}
                for name, c in self.costs.items()}
