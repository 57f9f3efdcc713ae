"""Optimizer steps to step boundaries, on real optimizers: one boundary per cycle, and an
optimizer created anew in place of the one closing cycles loses no step."""

from __future__ import annotations

import torch
from torch import nn

from torchleak.record.steps import StepClock


def _boundaries(clock: StepClock, calls: list[torch.optim.Optimizer]) -> int:
    return sum(clock.observe(id(opt), opt) for opt in calls)


def test_an_optimizer_created_anew_every_few_steps_keeps_every_step() -> None:
    model = nn.Linear(4, 4)
    clock = StepClock()
    boundaries = 0
    for k in (3, 1, 10):
        opt = torch.optim.Adam(model.parameters())
        for step in range(30):
            if step % k == 0:
                opt = torch.optim.Adam(model.parameters())  # the old one is freed here
            boundaries += clock.observe(id(opt), opt)
    assert boundaries == 90


def test_gan_cycles_count_once_and_a_new_generator_optimizer_takes_over() -> None:
    d, g = nn.Linear(4, 1), nn.Linear(4, 4)
    opt_d, opt_g = torch.optim.SGD(d.parameters(), lr=0.1), torch.optim.SGD(g.parameters(), lr=0.1)
    clock = StepClock()
    assert _boundaries(clock, [opt_d, opt_g] * 10) == 10
    for cycle in range(10):
        if cycle % 5 == 0:
            opt_g = torch.optim.SGD(g.parameters(), lr=0.1)
        assert _boundaries(clock, [opt_d, opt_g]) == 1, cycle


def test_an_occasional_optimizer_never_closes_steps_while_the_main_one_lives() -> None:
    a, b = nn.Linear(4, 4), nn.Linear(4, 4)
    main, extra = torch.optim.SGD(a.parameters(), lr=0.1), torch.optim.SGD(b.parameters(), lr=0.1)
    clock = StepClock()
    calls = []
    for step in range(40):
        calls.append(main)
        if step % 10 == 9:
            calls.append(extra)
    assert _boundaries(clock, calls) == 40


def test_a_second_stage_optimizer_takes_over_a_living_one_that_went_quiet() -> None:
    model = nn.Linear(4, 4)
    first, second = torch.optim.SGD(model.parameters(), lr=0.1), torch.optim.Adam(model.parameters())
    clock = StepClock()
    assert _boundaries(clock, [first] * 10) == 10
    # `first` is still referenced: the takeover waits for a second call, one step is shared.
    assert _boundaries(clock, [second] * 10) == 9
