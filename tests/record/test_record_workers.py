"""DataLoader workers are sampled: their pids appear as role='worker' and the
``torch_trace`` view carries their USS."""

from __future__ import annotations

from pathlib import Path

import pytest
from recordkit import Recorded, RunPool, prefetch, record, weight, write_script

pytestmark = pytest.mark.slow

STEPS = 40
WARMUP_STEPS = 5  # the sampler thread first lists the children on its first wake-up

WORKERS = f"""
    import os
    import sys
    import time

    import torch
    from torch.utils.data import DataLoader, TensorDataset

    PIDS = sys.argv[1]


    class SlowDataset(TensorDataset):
        def __getitem__(self, index):
            time.sleep(0.005)  # 4 items a batch: ~20 ms a batch per worker
            return super().__getitem__(index)


    def remember_pid(worker_id):
        with open(PIDS, "a") as fh:
            fh.write(f"{{os.getpid()}}\\n")


    if __name__ == "__main__":
        torch.manual_seed(0)
        torch.set_num_threads(1)
        data = SlowDataset(torch.randn({STEPS} * 4, 16), torch.randn({STEPS} * 4, 1))
        loader = DataLoader(data, batch_size=4, num_workers=2, persistent_workers=True,
                            worker_init_fn=remember_pid)
        model = torch.nn.Linear(16, 1)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
        for x, y in loader:
            loss = torch.nn.functional.mse_loss(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            time.sleep(0.02)
        print("done")
"""


@prefetch
@weight(4)
def record_workers(folder: Path) -> tuple[Recorded, Path]:
    pids_file = folder / "worker-pids.txt"
    run = record(folder, write_script(folder, "workers.py", WORKERS), str(pids_file),
                 options=("--quiet",))
    return run, pids_file


@pytest.fixture(scope="module")
def workers_run(runs: RunPool) -> tuple[Recorded, set[int]]:
    run, pids_file = runs.get(record_workers)
    assert run.proc.returncode == 0, run.proc.stderr
    pids = {int(line) for line in pids_file.read_text().split()}
    assert len(pids) == 2
    return run, pids


def test_every_batch_is_a_step(workers_run: tuple[Recorded, set[int]]) -> None:
    run, _ = workers_run
    assert run.scalar("SELECT COUNT(*) FROM steps") == STEPS


def test_both_worker_pids_are_sampled(workers_run: tuple[Recorded, set[int]]) -> None:
    run, pids = workers_run
    sampled = {pid for (pid,) in run.rows(
        "SELECT DISTINCT pid FROM process_samples WHERE role = 'worker'")}
    assert pids <= sampled
    per_worker = dict(run.rows("SELECT pid, MIN(uss) FROM process_samples "
                               "WHERE role = 'worker' GROUP BY pid"))
    assert all(per_worker[pid] > 0 for pid in pids)


def test_workers_uss_in_every_step_after_warmup(
        workers_run: tuple[Recorded, set[int]]) -> None:
    """The exact assertion: from step WARMUP_STEPS on, every row of ``torch_trace`` has a
    non-NULL, positive ``workers_uss`` (MiB) no larger than the workers' summed RSS."""
    run, _ = workers_run
    rows = run.rows("SELECT step, workers_uss FROM torch_trace WHERE step >= ? ORDER BY step",
                    WARMUP_STEPS)
    assert len(rows) == STEPS - WARMUP_STEPS + 1
    missing = [step for step, value in rows if value is None or value <= 0]
    assert missing == []
    max_rss_mib = run.scalar("SELECT SUM(r) FROM (SELECT MAX(rss) AS r FROM process_samples "
                             "WHERE role = 'worker' GROUP BY pid)") / 1048576.0
    assert all(value <= max_rss_mib for _, value in rows)


MIB = 1 << 20


def _sweeps(growth_per_step: int, steps_per_sweep: int, sweeps: int) -> list[bool]:
    """Feed the sampler's pacing rule sweeps of two workers whose summed USS grows by
    ``growth_per_step`` a step; whether it reads them at the quiet rate after each."""
    from torchleak.record.probes.process import ChildSampler

    sampler = ChildSampler(lambda *row: None, lambda: 0)
    workers = frozenset({101, 102})
    quiet = []
    for sweep in range(sweeps):
        step = sweep * steps_per_sweep
        sampler.children_uss = 400 * MIB + growth_per_step * step
        sampler._track_stillness(workers, step)
        quiet.append(sampler.quiet)
    return quiet


def test_still_workers_are_read_at_the_quiet_rate_once_still_over_sweeps_and_steps() -> None:
    assert _sweeps(0, 50, 8) == [False] * 4 + [True] * 4  # 4 still sweeps, 200 steps
    assert not any(_sweeps(0, 5, 8))  # 8 sweeps are 40 steps: too few to call them still


def test_workers_filling_a_cache_are_never_read_at_the_quiet_rate() -> None:
    # 16 items of 4 KiB a step between two workers: under 1 MiB a worker over four sweeps
    # of a slow machine, over it within the steps a still streak needs.
    assert not any(_sweeps(64 * 1024, 5, 40))
    assert not any(_sweeps(64 * 1024, 50, 40))
