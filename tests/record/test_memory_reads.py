"""How often a step boundary reads the process's memory: densely while it moves, spaced
out while readings repeat, dense again at the first change. The recorder's clock is a
stand-in advanced by each step (no wall clock decides what the trace holds); the memory
is the process's own, read from the kernel as in any run."""

from __future__ import annotations

import mmap
import sqlite3
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import torch

from torchleak.record import session
from torchleak.record.session import MEMORY_READ_MAX_SECONDS, MEMORY_READ_SECONDS, Recorder

STEP_SECONDS = 0.0005  # a sub-millisecond step: 1 ms between reads is every second step
LEAK_BYTES = 256 << 10


class SteppedClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Iterator[SteppedClock]:
    stepped = SteppedClock()
    monkeypatch.setattr(session, "_perf_counter", stepped)  # the boundary's clock only
    yield stepped


def _train(steps: int, clock: SteppedClock, recorder: Recorder,
           each_step: Callable[[int], None]) -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(8, 16), torch.randint(0, 4, (8,))
    for step in range(steps):
        loss = torch.nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        each_step(step)
        clock.now += STEP_SECONDS
        recorder.boundary(sys._getframe())


def _readings(trace: Path) -> list[int]:
    conn = sqlite3.connect(trace)
    try:
        return [r[0] for r in conn.execute("SELECT step FROM steps WHERE uss IS NOT NULL "
                                           "ORDER BY step")]
    finally:
        conn.close()


def _record(tmp_path: Path, clock: SteppedClock, phases: list[tuple[int, bool]]) -> list[int]:
    """Steps read, over phases of (steps, leaking): a leaking step keeps 256 KiB written
    in new pages (mapped for it: the C heap of a process that ran other tests may hold
    enough freed memory to take a leak of bytes objects without growing)."""
    recorder = Recorder(tmp_path / "trace.sqlite", {"script": "loop.py"})
    recorder.start()
    kept: list[mmap.mmap] = []

    def leak(step: int) -> None:
        buffer = mmap.mmap(-1, LEAK_BYTES)
        buffer.write(b"x" * LEAK_BYTES)
        kept.append(buffer)

    for steps, leaking in phases:
        _train(steps, clock, recorder, leak if leaking else (lambda step: None))
    recorder.stop("finished", 0)
    recorder.close()
    for buffer in kept:
        buffer.close()
    return _readings(tmp_path / "trace.sqlite")


def test_a_flat_loop_is_read_less_often_and_never_more_than_the_longest_spacing_apart(
        tmp_path: Path, clock: SteppedClock) -> None:
    steps = 3000
    read = _record(tmp_path, clock, [(400, False), (steps, False)])
    # At one reading a millisecond this loop would have 1,700; while its memory stays the
    # same the spacing doubles up to the longest (a page or two moving now and then
    # makes it dense again for a while).
    assert len(read) < 0.5 * (400 + steps) * STEP_SECONDS / MEMORY_READ_SECONDS, len(read)
    widest = round(MEMORY_READ_MAX_SECONDS / STEP_SECONDS) + 1  # +1: the clock's rounding
    assert max(b - a for a, b in zip(read, read[1:])) <= widest, read
    assert read[:2] == [1, 2]  # the run's memory before and after its first step


def test_memory_that_moves_is_read_every_millisecond_from_the_first_change(
        tmp_path: Path, clock: SteppedClock) -> None:
    flat, leaking = 600, 200
    read = _record(tmp_path, clock, [(flat, False), (leaking, True)])
    after = [s for s in read if s > flat]
    dense = round(MEMORY_READ_SECONDS / STEP_SECONDS)
    widest = round(MEMORY_READ_MAX_SECONDS / STEP_SECONDS) + 1  # +1: the clock's rounding
    # The growth is seen within the longest spacing of its start, then at every reading
    # the 1 ms spacing allows: each one differs from the last.
    assert after[0] <= flat + widest, after[:3]
    assert all(dense <= b - a <= dense + 1 for a, b in zip(after, after[1:])), after
    assert len(after) >= (leaking - widest) // (dense + 1)
