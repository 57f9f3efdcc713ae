"""Never harmful: training gives bit-identical results with and without torchleak, and a
probe that fails is switched off and recorded while training carries on."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
from recordkit import Recorded, RunPool, plain_then_recorded, prefetch, weight

pytestmark = pytest.mark.slow

TRAIN = """
    import torch
    from torch.utils.data import DataLoader, TensorDataset

    torch.manual_seed(1234)
    torch.set_num_threads(1)
    data = TensorDataset(torch.randn(512, 20), torch.randint(0, 3, (512,)))
    loader = DataLoader(data, batch_size=32, shuffle=True)  # draws from torch's RNG
    model = torch.nn.Sequential(torch.nn.Linear(20, 64), torch.nn.ReLU(), torch.nn.Dropout(0.2),
                                torch.nn.Linear(64, 3))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=16, gamma=0.5)
    history = []
    for epoch in range(4):
        model.train()
        for x, y in loader:
            loss = torch.nn.functional.cross_entropy(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            scheduler.step()
            history.append(loss.item())
        model.eval()
        with torch.no_grad():
            accuracy = (model(data.tensors[0]).argmax(1) == data.tensors[1]).float().mean()
    total = sum(p.double().sum().item() for p in model.parameters())
    print("final loss", repr(history[-1]))
    print("loss sum", repr(sum(history)))
    print("param sum", repr(total))
    print("accuracy", repr(accuracy.item()))
    print("rng", repr(torch.rand(1).item()))
"""

# User objects whose introspection is user code: a __getattribute__ that counts (and
# refuses) every look at __class__, a list subclass whose __len__/__iter__ draw random
# numbers, a tensor subclass with __torch_function__. The holder walk meets them as locals
# of the training function and must run none of that code. And one probe really fails:
# the script replaces gc.get_objects, which the census needs.
HOSTILE = """
    import gc
    import random

    import torch

    CALLS = {"class": 0, "len": 0, "torch_function": 0}


    class Hostile:
        def __getattribute__(self, name):
            if name == "__class__":
                CALLS["class"] += 1
                raise RuntimeError("no introspection, please")
            return object.__getattribute__(self, name)


    class Noisy(list):
        def __len__(self):
            CALLS["len"] += 1
            random.random()
            return list.__len__(self)

        def __iter__(self):
            CALLS["len"] += 1
            random.random()
            return list.__iter__(self)


    class Traced(torch.Tensor):
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            CALLS["torch_function"] += 1
            return super().__torch_function__(func, types, args, kwargs or {})


    def boom():
        raise RuntimeError("no heap scans, please")


    def train():
        torch.manual_seed(7)
        random.seed(7)
        torch.set_num_threads(1)
        hostile = Hostile()
        noisy = Noisy(range(100))
        traced = torch.randn(64, 64).as_subclass(Traced)
        model = torch.nn.Linear(8, 1)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
        for step in range(60):
            loss = model(torch.randn(16, 8)).pow(2).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            noisy.append(step)
        print("final loss", repr(loss.item()))
        print("param sum", repr(sum(p.sum().item() for p in model.parameters())))
        print("random", repr(random.random()))
        print("calls", CALLS)


    gc.get_objects = boom
    train()
"""


# The census (~50 ms with torch loaded) is paid for by the run's length: 1% of a run of
# seconds pays for none (docs/detection.md). These runs must take one.
CENSUS_BUDGET = ("--budget", "20")


@prefetch
@weight(2)
def plain_and_recorded(folder: Path) -> tuple[subprocess.CompletedProcess[str], Recorded]:
    # A budget that pays for a census in a run this short (see CENSUS_BUDGET).
    return plain_then_recorded(folder, "train.py", TRAIN, CENSUS_BUDGET)


@prefetch
@weight(2)
def hostile_plain_and_recorded(folder: Path) -> tuple[subprocess.CompletedProcess[str], Recorded]:
    return plain_then_recorded(folder, "hostile.py", HOSTILE, ("--quiet", *CENSUS_BUDGET))


def _both(runs: RunPool, job: Any) -> tuple[subprocess.CompletedProcess[str], Recorded]:
    plain, recorded = runs.get(job)
    assert plain.returncode == 0, plain.stderr
    assert recorded.proc.returncode == 0, recorded.proc.stderr
    return plain, recorded


def test_training_results_are_bit_identical(runs: RunPool) -> None:
    plain, recorded = _both(runs, plain_and_recorded)
    assert recorded.proc.stdout == plain.stdout
    assert "param sum" in plain.stdout
    assert recorded.scalar("SELECT COUNT(*) FROM steps") == 4 * 16
    # The run was really observed, expensive probes included.
    assert recorded.scalar("SELECT COUNT(*) FROM census") >= 1
    assert recorded.scalar("SELECT COUNT(DISTINCT step) FROM holders") >= 1
    assert recorded.scalar("SELECT COUNT(*) FROM events WHERE kind = 'probe_disabled'") == 0


def test_a_failing_probe_is_switched_off_and_recorded(runs: RunPool) -> None:
    plain, recorded = _both(runs, hostile_plain_and_recorded)
    assert recorded.proc.stdout == plain.stdout  # the training itself never noticed
    assert recorded.proc.stderr == ""
    events = recorded.rows("SELECT step, source, message FROM events "
                           "WHERE kind = 'probe_disabled'")
    assert [(source, message) for _, source, message in events] == [
        ("census", "RuntimeError: no heap scans, please")]
    assert recorded.meta("probes_disabled") == ["census"]
    # Everything else kept recording: every step, and the holder walks, which met the
    # hostile objects without running any of their code (the counts printed match).
    assert recorded.scalar("SELECT COUNT(*) FROM steps") == 60
    assert recorded.scalar("SELECT COUNT(DISTINCT step) FROM holders") >= 3
    assert "calls {'class': 0, 'len': 0, 'torch_function': 0}" in plain.stdout
