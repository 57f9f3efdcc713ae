"""torchleak's own memory over long runs, side by side with plain Python.

    python benchmarks/footprint.py [--steps 10000 200000 2000000]

For each run length, the same tiny training loop (a 4 -> 1 linear layer, SGD, batch 8,
one thread) runs as ``python loop.py N`` and as ``torchleak run --quiet loop.py N``; the
peak RSS of each process (``wait4``'s ``ru_maxrss``, the analysis at the end included)
and their difference are printed. torchleak's recorder, live detector and analysis keep
bounded state, so the difference must not grow with the run's length.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

LOOP = """
import sys
import torch

torch.manual_seed(0)
torch.set_num_threads(1)
model = torch.nn.Linear(4, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
x, y = torch.randn(8, 4), torch.randn(8, 1)
for step in range(int(sys.argv[1])):
    loss = torch.nn.functional.mse_loss(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print("done", step + 1)
"""


def measure(argv: list[str], cwd: Path) -> tuple[float, float]:
    """(peak RSS MiB, wall seconds) of one child process."""
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    start = time.perf_counter()
    proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    _pid, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    if status != 0:
        raise SystemExit(f"{argv} failed: {proc.stderr.read().decode()[-2000:]}")  # type: ignore[union-attr]
    return usage.ru_maxrss / 1024, wall


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, nargs="+", default=[10_000, 200_000, 2_000_000])
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="torchleak-footprint-"))
    (work / "loop.py").write_text(LOOP)
    print("| steps | plain peak | torchleak peak | difference | plain wall | torchleak wall |")
    print("|---|---|---|---|---|---|")
    for steps in args.steps:
        plain, plain_wall = measure([sys.executable, "loop.py", str(steps)], work)
        ours, our_wall = measure([sys.executable, "-m", "torchleak", "run", "--quiet", "--out",
                                  str(work / f"run-{steps}"), "loop.py", str(steps)], work)
        print(f"| {steps:,} | {plain:.0f} MiB | {ours:.0f} MiB | {ours - plain:+.0f} MiB | "
              f"{plain_wall:.1f} s | {our_wall:.1f} s |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
