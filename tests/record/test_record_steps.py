"""What a step is: one optimizer cycle (GAN pairs, accumulated micro-batches),
``torchleak.watch().step()`` without an optimizer; marks from the API and from eval()."""

from __future__ import annotations

from pathlib import Path

import pytest
from recordkit import Recorded, RunPool, prefetch, record, weight, write_script

pytestmark = pytest.mark.slow

GAN_CYCLES = 30
UPDATES, MICRO_BATCHES, EPOCHS = 12, 4, 2
WATCHED, DECORATED = 25, 10

GAN = f"""
    import torch

    torch.manual_seed(0)
    torch.set_num_threads(1)
    nn = torch.nn
    generator = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 8))
    discriminator = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1))
    opt_d = torch.optim.Adam(discriminator.parameters(), lr=1e-3)
    opt_g = torch.optim.Adam(generator.parameters(), lr=1e-3)
    bce = torch.nn.BCEWithLogitsLoss()
    for cycle in range({GAN_CYCLES}):
        real, noise = torch.randn(16, 8), torch.randn(16, 4)
        fake = generator(noise)
        loss_d = bce(discriminator(real), torch.ones(16, 1)) + bce(
            discriminator(fake.detach()), torch.zeros(16, 1))
        opt_d.zero_grad()
        loss_d.backward()
        opt_d.step()
        loss_g = bce(discriminator(fake), torch.ones(16, 1))
        opt_g.zero_grad()
        loss_g.backward()
        opt_g.step()
    print("cycles", {GAN_CYCLES})
"""

ACCUMULATE = f"""
    import torch
    import torchleak

    torch.manual_seed(0)
    torch.set_num_threads(1)
    nn = torch.nn
    model = nn.Sequential(nn.Linear(16, 32), nn.Dropout(0.1), nn.Linear(32, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    backwards = 0
    for epoch in range({EPOCHS}):
        torchleak.mark("epoch")
        model.train()
        for update in range({UPDATES}):
            for micro in range({MICRO_BATCHES}):
                loss = model(torch.randn(4, 16)).pow(2).mean() / {MICRO_BATCHES}
                loss.backward()
                backwards += 1
            optimizer.step()
            optimizer.zero_grad()
        model.eval()  # validation: no optimizer steps
        with torch.no_grad():
            model(torch.randn(64, 16))
        torchleak.mark("checkpoint", epoch)
    model.train()
    print("backwards", backwards)
"""

RECREATED = 60
RECREATE = f"""
    import torch

    torch.set_num_threads(1)
    model = torch.nn.Linear(8, 8)
    for i in range({RECREATED}):
        if i % 3 == 0:  # a new optimizer in place of the old one (after the model changed)
            opt = torch.optim.Adam(model.parameters(), lr=1e-3)
        loss = model(torch.randn(4, 8)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    print("iterations", {RECREATED})
"""

WATCH = f"""
    import torch
    import torchleak

    torch.set_num_threads(1)
    weights = torch.randn(32, 32)
    with torchleak.watch() as watcher:
        for i in range({WATCHED}):
            weights = torch.tanh(weights @ weights.T / 32)  # no optimizer anywhere
            watcher.step()


    @torchleak.watch()
    def infer(batch):
        return (batch @ weights).sum().item()


    for i in range({DECORATED}):
        infer(torch.randn(8, 32))
    print("done")
"""


def _record(folder: Path, name: str, source: str) -> Recorded:
    return record(folder, write_script(folder, name, source), options=("--quiet",))


@prefetch
@weight(2)
def record_gan(folder: Path) -> Recorded:
    return _record(folder, "gan.py", GAN)


@prefetch
@weight(2)
def record_accumulate(folder: Path) -> Recorded:
    return _record(folder, "accumulate.py", ACCUMULATE)


@prefetch
@weight(2)
def record_recreate(folder: Path) -> Recorded:
    return _record(folder, "recreate.py", RECREATE)


@prefetch
@weight(2)
def record_watch(folder: Path) -> Recorded:
    return _record(folder, "watch.py", WATCH)


def _finished(runs: RunPool, job: object) -> Recorded:
    run = runs.get(job)  # type: ignore[arg-type]
    assert run.proc.returncode == 0, run.proc.stderr
    return run


def test_gan_one_step_per_discriminator_generator_cycle(runs: RunPool) -> None:
    run = _finished(runs, record_gan)
    assert run.scalar("SELECT COUNT(*) FROM steps") == GAN_CYCLES
    assert run.meta("steps") == GAN_CYCLES


def test_an_optimizer_created_anew_every_few_steps_loses_no_step(runs: RunPool) -> None:
    run = _finished(runs, record_recreate)
    assert run.scalar("SELECT COUNT(*) FROM steps") == RECREATED


def test_gradient_accumulation_one_step_per_optimizer_step(runs: RunPool) -> None:
    run = _finished(runs, record_accumulate)
    assert f"backwards {EPOCHS * UPDATES * MICRO_BATCHES}" in run.proc.stdout
    assert run.scalar("SELECT COUNT(*) FROM steps") == EPOCHS * UPDATES


def test_epoch_marks_and_user_marks(runs: RunPool) -> None:
    run = _finished(runs, record_accumulate)
    epochs = run.rows("SELECT step, value FROM marks WHERE name = 'epoch' ORDER BY t")
    assert epochs == [(0, None), (UPDATES, None)]
    checkpoints = run.rows("SELECT step, value FROM marks WHERE name = 'checkpoint' ORDER BY t")
    assert checkpoints == [(UPDATES, "0"), (2 * UPDATES, "1")]
    # The step rows carry the epoch the mark opened.
    assert run.rows("SELECT epoch, COUNT(*) FROM steps GROUP BY epoch ORDER BY epoch") == [
        (1, UPDATES), (2, UPDATES)]


def test_eval_and_train_mark_validation_automatically(runs: RunPool) -> None:
    run = _finished(runs, record_accumulate)
    marks = run.rows("SELECT step, name FROM marks WHERE name LIKE 'validation_%' ORDER BY t")
    assert marks == [(UPDATES, "validation_start"), (UPDATES, "validation_end"),
                     (2 * UPDATES, "validation_start"), (2 * UPDATES, "validation_end")]
    # Training steps are never inside the validation phase.
    assert run.rows("SELECT DISTINCT phase FROM steps") == [("train",)]


def test_watch_counts_steps_without_an_optimizer(runs: RunPool) -> None:
    run = _finished(runs, record_watch)
    assert run.scalar("SELECT COUNT(*) FROM steps") == WATCHED + DECORATED
    assert run.rows("SELECT MIN(step), MAX(step) FROM steps") == [(1, WATCHED + DECORATED)]
