"""What torchleak's step boundary costs a fast step, measured in one process (a script).

    python benchmarks/boundary_cost.py [--rounds 80] [--baseline OTHER_TREE/src] [--device cuda]

``overhead.py`` compares two processes, whose step times differ by 1-3% with nothing
changed (memory layout, the machine's load). Here one ``torchleak run`` process trains the
tiny MLP of ``overhead.py`` (0.4 ms steps) in blocks of 200 steps, alternately with
torchleak's optimizer hook installed and removed (its threads, probes and trace stay), and
pairs each block with its neighbour. Printed: the median step with and without the hook,
the ratio of the medians, the median of the paired ratios, and the step's extra time in
microseconds, split into forward, backward and ``optimizer.step()`` (where the hook runs).
``--baseline`` runs the same in another tree's torchleak right after. ``--device cuda``
trains on the GPU and waits for it at the end of each step (the step's time is then what
the GPU and the launching thread take together; ``optimizer.step()`` is the launch).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from overhead import MODEL  # noqa: E402

# overhead.py's tiny workload (needs ``device``).
TINY_MODEL = "width, depth, batch = 128, 2, 64\n" + MODEL

LOOP = '''
import statistics, sys, time
import torch
from torch.optim.optimizer import _global_optimizer_post_hooks

rounds, device, block = int(sys.argv[1]), sys.argv[2], 200
sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
''' + TINY_MODEL + '''clock = time.perf_counter


def step(parts):
    t0 = clock()
    loss = torch.nn.functional.cross_entropy(model(x), y)
    t1 = clock()
    optimizer.zero_grad()
    loss.backward()
    t2 = clock()
    optimizer.step()
    t3 = clock()
    sync()
    t4 = clock()
    parts[0].append(t1 - t0), parts[1].append(t2 - t1), parts[2].append(t3 - t2)
    parts[3].append(t4 - t3)
    return t4 - t0


for _ in range(300):
    step([[], [], [], []])
ours = dict(_global_optimizer_post_hooks)
medians = {True: [], False: []}
parts = {True: [[], [], [], []], False: [[], [], [], []]}
for r in range(rounds):
    for hooked in ((True, False) if r % 2 else (False, True)):
        _global_optimizer_post_hooks.clear()
        if hooked:
            _global_optimizer_post_hooks.update(ours)
        medians[hooked].append(statistics.median(step(parts[hooked]) for _ in range(block)))
_global_optimizer_post_hooks.update(ours)
on, off = statistics.median(medians[True]), statistics.median(medians[False])
paired = statistics.median(a / b for a, b in zip(medians[True], medians[False]))
split = ", ".join(f"{name} {1e6 * (statistics.median(parts[True][i]) - statistics.median(parts[False][i])):+.1f}"
                  for i, name in enumerate(("forward", "backward", "optimizer.step()", "wait")))
print(f"step with the hook {1e6 * on:.1f} us, without {1e6 * off:.1f} us: ratio {on / off:.4f}, "
      f"paired {paired:.4f}, extra {1e6 * (on - off):.1f} us ({split})", flush=True)
'''


def record(loop: str, args: list[str], source: Path | None = None) -> str:
    """``loop`` run under ``torchleak run`` (``source``: another tree's ``src``); its
    output."""
    with tempfile.TemporaryDirectory() as folder:
        script = Path(folder) / "loop.py"
        script.write_text(loop)
        env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
        if source is not None:
            env["PYTHONPATH"] = str(source)
        done = subprocess.run([sys.executable, "-m", "torchleak", "run", "--quiet", "--out",
                               str(Path(folder) / "run"), str(script), *args],
                              env=env, cwd=folder, capture_output=True, text=True, check=True)
        return done.stdout.strip()


def run(rounds: int, source: Path | None, device: str) -> str:
    return record(LOOP, [str(rounds), device], source).splitlines()[-1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=80)
    parser.add_argument("--baseline", type=Path, help="another tree's src folder")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                        help="where the model trains (default cpu)")
    args = parser.parse_args()
    print("this tree:", run(args.rounds, None, args.device))
    if args.baseline is not None:
        print("baseline: ", run(args.rounds, args.baseline, args.device))


if __name__ == "__main__":
    main()
