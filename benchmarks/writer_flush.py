"""What the trace writer's flushes cost a fast training step (a script, not a test).

    python benchmarks/writer_flush.py [--rounds 40] [--block 1200]

The trace writer runs on a thread of its own, so a one-process swap of the step boundary
(``boundary_cost.py``) never sees it: it flushes in both halves. Here one process trains
``overhead.py``'s tiny MLP and appends one steps row a step through a real
``TraceWriter``, as the recorder does, while a thread flushes it every 0.25 s (the
writer's interval); blocks of ``--block`` steps alternate between the flush as it is (a
table's rows in one statement), the flush row by row (``executemany``, the writer before
it) and no flush at all. Printed: the median step of each, its extra time against no
flush, and the median of the paired ratios.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import torch

from torchleak.trace.writer import TraceWriter

MODES = ("one statement", "row by row", "no flush")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--block", type=int, default=1200, help="steps per block")
    args = parser.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(),
                                torch.nn.Linear(128, 128), torch.nn.ReLU(),
                                torch.nn.Linear(128, 10))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x, y = torch.randn(64, 64), torch.randint(0, 10, (64,))
    with tempfile.TemporaryDirectory() as folder:
        writer = TraceWriter(Path(folder) / "trace.sqlite")
        batch = writer._json_rows  # what this SQLite allows
        mode = [MODES[2]]
        stop = threading.Event()

        def flusher() -> None:
            while not stop.wait(0.25):
                if mode[0] != MODES[2]:
                    writer._json_rows = batch and mode[0] == MODES[0]
                    writer.flush()

        thread = threading.Thread(target=flusher, daemon=True)
        thread.start()
        add = writer.appender("steps")
        clock = time.perf_counter
        count = [0]

        def step() -> float:
            start = clock()
            loss = torch.nn.functional.cross_entropy(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            count[0] += 1
            # the recorder's row: a memory reading on about every third step
            reading = 300_000_000 if count[0] % 3 == 0 else None
            add((count[0], start, 0.43, None, "train", reading, reading, 5, 0.001))
            return clock() - start

        def block(run: Callable[[], float]) -> float:
            return statistics.median(run() for _ in range(args.block))

        for _ in range(300):
            step()
        medians: dict[str, list[float]] = {m: [] for m in MODES}
        for r in range(args.rounds):
            for name in MODES[r % 3:] + MODES[:r % 3]:
                mode[0] = name
                if name == MODES[2]:
                    writer.flush()  # what the last block left: no flush inside this one
                medians[name].append(block(step))
        stop.set()
        thread.join()
        writer.close()
    if not batch:
        print("this SQLite has no JSON functions: the writer inserts row by row")
    base = statistics.median(medians[MODES[2]])
    for name in MODES:
        median = statistics.median(medians[name])
        paired = statistics.median(a / b for a, b in zip(medians[name], medians[MODES[2]]))
        print(f"{name:14s} step {1e6 * median:6.1f} us  {1e6 * (median - base):+5.1f} us  "
              f"paired {paired:.4f}")


if __name__ == "__main__":
    main()
