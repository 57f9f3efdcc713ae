"""The probe scheduler: anchors run, the budget holds, and the census's cost estimate (a
walk of Python's heap arenas) is only taken when the census may run."""

from __future__ import annotations

import pytest
from torchleak.record.probes.census_probe import Census
from torchleak.record.probes.holder_probes import HolderWalk, QuickRemeasure
from torchleak.record.schedule import ANCHOR_STEPS, HOLDER_ANCHORS, Scheduler


def _scheduler(budget: float) -> Scheduler:
    """A scheduler with the recorder's scheduled probes and their declared costs."""
    scheduler = Scheduler(budget=budget, started=0.0)
    for probe in (HolderWalk, QuickRemeasure, Census):
        scheduler.add(probe.name, probe.cost)
    return scheduler


def test_early_anchors_run_and_the_estimate_is_taken_for_them() -> None:
    scheduler = _scheduler(0.01)
    calls: list[int] = []
    # 10 s into the process: 1.5% of it (150 ms) pays for a 50 ms census.
    reason = scheduler.due("census", 3, now=10.0, estimate=lambda: calls.append(3) or 0.05)
    assert reason == "anchor" and calls == [3]


def test_an_anchor_the_run_cannot_pay_for_yet_is_owed_and_runs_when_it_can() -> None:
    scheduler = _scheduler(0.01)
    # 1.5 s into the process (torch just imported): a census (80 ms expected) would be 5%
    # of the run. Refused without the estimate (itself ~0.1-0.3 ms a boundary).
    calls: list[int] = []
    assert scheduler.due("census", 3, now=1.5, estimate=lambda: calls.append(3) or 0.05) is None
    assert calls == []
    assert scheduler.due("holders", 3, now=1.5) == "anchor"  # a walk (~5 ms) fits
    scheduler.ran("holders", 3, 0.005)
    scheduler.plan(quick=False, step=3, now=1.5)
    # The owed census's gate opens when the run has paid for it: (5 + 80 ms) / 1.5%.
    opens = (0.005 + scheduler.costs["census"].expected) / 0.015
    assert pytest.approx(opens) in [due for due, _ in scheduler.gates]
    assert scheduler.due("census", 17, now=opens - 0.1, estimate=lambda: 0.05) is None
    assert scheduler.due("census", 17, now=opens + 0.1, estimate=lambda: 0.05) == "anchor"
    scheduler.ran("census", 17, 0.05)
    assert scheduler.early_spent == pytest.approx(0.055)  # both outside the budget
    assert not scheduler.owed


def test_the_fixed_anchors_spend_a_share_of_a_short_run_only() -> None:
    scheduler = _scheduler(0.01)
    now = 1.5  # a fast loop after torch's import: 1 ms a step, walks of 4 ms
    for step in range(1, 1000):
        now += 0.001
        if scheduler.due("holders", step, now=now) == "anchor":
            scheduler.ran("holders", step, 0.004)
        if scheduler.due("census", step, now=now, estimate=lambda: 0.05) == "anchor":
            scheduler.ran("census", step, 0.05)
    # Every walk anchor ran at its step (whatever the clock); no census fitted beside them.
    walk_anchors = [s for s in range(1, 1000) if s in HOLDER_ANCHORS or s in ANCHOR_STEPS]
    assert scheduler.costs["holders"].runs == len(walk_anchors)
    assert scheduler.costs["census"].runs == 0 and "census" in scheduler.owed


def test_no_estimate_while_the_census_gap_has_not_passed() -> None:
    scheduler = _scheduler(1.0)  # a budget that always allows a census
    scheduler.ran("census", 60, 0.01)
    calls: list[int] = []
    for step in range(61, 70):  # within the 10-step gap, no anchor among them
        assert step not in ANCHOR_STEPS
        assert scheduler.due("census", step, now=100.0,
                             estimate=lambda: calls.append(1) or 0.01) is None
    assert calls == []
    assert scheduler.due("census", 70, now=100.0,
                         estimate=lambda: calls.append(1) or 0.01) == "schedule"
    assert calls == [1]


def test_the_budget_refuses_a_census_it_cannot_afford() -> None:
    scheduler = _scheduler(0.01)
    scheduler.ran("census", 60, 0.5)
    # 10 s of wall time buys 1 ms of census (10% of a 1% budget): a 0.5 s one must wait.
    assert scheduler.due("census", 90, now=10.0, estimate=lambda: 0.5) is None


def test_a_late_holder_anchor_runs_with_the_budget_spent_and_is_a_fixed_cost() -> None:
    scheduler = _scheduler(0.01)
    for step in range(60, 80):  # scheduled walks that spent past the budget: 80 ms > 45 ms
        scheduler.ran("holders", step, 0.004)
    late = min(s for s in HOLDER_ANCHORS if s > 100)
    assert scheduler.due("holders", late + 1, now=10.0) is None  # no anchor: no room
    assert scheduler.due("holders", late, now=10.0) == "anchor"
    fixed = scheduler.early_of("holders")
    scheduler.ran("holders", late, 0.002)
    assert scheduler.early_of("holders") == fixed + 0.002  # outside the budget
    # A census anchor past start-up runs outside the budget when one census is cheap (a
    # fixed cost of log2(steps) censuses), and needs the budget's room when it is dear.
    assert scheduler.due("census", 3200, now=10.0, estimate=lambda: 0.5) is None
    assert scheduler.due("census", 3201, now=10.0, estimate=lambda: 0.05) is None


def test_the_quick_remeasure_is_spread_so_it_costs_a_small_share_of_fast_steps() -> None:
    scheduler = _scheduler(1.0)  # the budget allows everything here
    scheduler.ran("quick", 100, 0.0001)  # 0.1 ms on a 1 ms step: 10% if run every step
    scheduler.step_seconds = 0.001
    runs = [step for step in range(101, 141) if scheduler.due("quick", step, now=100.0)
            and scheduler.ran("quick", step, 0.0001) is None]
    assert len(runs) == 4, runs  # every tenth step: at most 1% of the steps' time
    scheduler.step_seconds = 0.1  # on a 100 ms step it may run at every boundary
    assert scheduler.due("quick", runs[-1] + 1, now=100.0) == "schedule"


def test_the_time_spent_choosing_probes_counts_in_the_quick_remeasures_spacing() -> None:
    scheduler = _scheduler(1.0)
    scheduler.step_seconds = 0.002  # a fast loop: 1% of a step is 20 us
    alone: list[int] = []
    for step in range(101, 141):  # a 10 us re-measure alone fits at every boundary
        if scheduler.due("quick", step, now=100.0):
            scheduler.ran("quick", step, 0.00001)
            alone.append(step)
    assert len(alone) == 40, alone
    chosen: list[int] = []
    for step in range(141, 181):  # ... but each such boundary took 30 us of our time
        if scheduler.due("quick", step, now=100.0):
            scheduler.ran("quick", step, 0.00001)
            scheduler.boundary_done(0.00003)
            chosen.append(step)
    assert 18 <= len(chosen) <= 21, chosen  # every second step: 30 us is 1% of two steps
    assert scheduler.plan_overhead == pytest.approx(0.00002)


def test_a_boundary_is_ready_only_when_one_probe_has_both_its_time_and_its_step() -> None:
    scheduler = _scheduler(0.01)
    scheduler.ran("census", 100, 0.05)  # within its gap from step 110, its budget far later
    scheduler.ran("quick", 100, 0.0001)  # its budget allows it now, its gap does not
    scheduler.ran("holders", 100, 0.5)  # neither
    scheduler.step_seconds = 0.0001  # a fast loop: the quick re-measure is spread out
    scheduler.plan(quick=True, step=120, now=40.0)
    # The quick re-measure's time has come, not its step; the census's step has come (110),
    # not its time (100 s): the boundary compares with the first of each.
    quick_step = max(first for _, first in scheduler.gates)
    assert scheduler.next_step == quick_step and scheduler.next_due == 100.0
    assert not scheduler.ready(120, now=40.0)
    assert scheduler.ready(quick_step, now=40.0)
    assert scheduler.ready(120, now=100.0)  # the census's budget allows it from 100 s
    assert not scheduler.ready(105, now=100.0)  # but not before its gap from step 100


def test_a_hunts_census_is_outside_the_budget_and_leaves_the_walks_their_share() -> None:
    scheduler = _scheduler(0.01)
    scheduler.outside_budget("census")  # the run asked: growth no holder explains
    scheduler.ran("census", 100, 0.1)
    assert scheduler.early_spent == pytest.approx(0.1) and scheduler.anchor_spent == 0
    # 3 s into the process the anchors' 45 ms are all there: the next walk anchor runs.
    walk_anchor = min(s for s in HOLDER_ANCHORS if s > 100)
    assert scheduler.due("holders", walk_anchor, now=3.0) == "anchor"
