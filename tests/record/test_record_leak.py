"""A planted leak of known size is measured to within 10% by both USS and the census."""

from __future__ import annotations

from pathlib import Path

import pytest
from recordkit import (KIB, Recorded, RunPool, least_squares, prefetch, record, theil_sen,
                       weight, write_script)

pytestmark = pytest.mark.slow

STEPS = 150
LEAK_PER_STEP = 256 * KIB  # torch.zeros(65536): 65536 float32

LEAK = f"""
    import torch

    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = torch.nn.Linear(16, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    kept = []
    for step in range({STEPS}):
        x, y = torch.randn(8, 16), torch.randn(8, 1)
        loss = torch.nn.functional.mse_loss(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        kept.append(torch.zeros(65536))  # the leak: 256 KiB a step, never released
    print("optimizer steps", {STEPS})
"""


@prefetch
@weight(3)
def record_leak(folder: Path) -> Recorded:
    # A budget that pays for censuses in a run this short (1% of a few seconds pays for
    # none: docs/detection.md).
    return record(folder, write_script(folder, "leak.py", LEAK),
                  options=("--quiet", "--budget", "20"))


@pytest.fixture(scope="module")
def leak_run(runs: RunPool) -> Recorded:
    run = runs.get(record_leak)
    assert run.proc.returncode == 0, run.proc.stderr
    return run


def test_one_row_per_optimizer_step(leak_run: Recorded) -> None:
    assert leak_run.scalar("SELECT COUNT(*) FROM steps") == STEPS
    assert leak_run.rows("SELECT MIN(step), MAX(step) FROM steps") == [(1, STEPS)]
    assert leak_run.meta("steps") == STEPS
    assert leak_run.meta("status") == "finished"
    assert leak_run.meta("exit_code") == 0


def test_uss_slope_is_the_planted_leak(leak_run: Recorded) -> None:
    rows = leak_run.rows("SELECT step, uss FROM steps WHERE step >= 10 AND uss IS NOT NULL "
                         "ORDER BY step")
    steps, uss = [r[0] for r in rows], [r[1] for r in rows]
    assert theil_sen(steps, uss) == pytest.approx(LEAK_PER_STEP, rel=0.10)
    assert least_squares(steps, uss) == pytest.approx(LEAK_PER_STEP, rel=0.10)


def test_census_slope_is_the_planted_leak(leak_run: Recorded) -> None:
    census = leak_run.rows("SELECT step, tensors, tensor_bytes FROM census ORDER BY step")
    assert len(census) >= 2, census
    # The widest span: censuses can come close together (a guard's snapshot, the end).
    (step_a, tensors_a, bytes_a), (step_b, tensors_b, bytes_b) = census[0], census[-1]
    assert (bytes_b - bytes_a) / (step_b - step_a) == pytest.approx(LEAK_PER_STEP, rel=0.10)
    # One new tensor per step, and the last census sees every tensor kept before its step
    # (the boundary is inside optimizer.step(), before that step's append).
    # (Not necessarily step STEPS: the end-of-run census is an anchor capped in cost, and
    # on a loaded machine its estimate can exceed the cap.)
    assert (tensors_b - tensors_a) / (step_b - step_a) == pytest.approx(1.0, rel=0.10)
    assert bytes_b >= (step_b - 1) * LEAK_PER_STEP
