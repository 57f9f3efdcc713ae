"""What do the ``--safe`` settings cost a training step? (a script, not a test)

    python benchmarks/safe_cost.py [--rounds 5] [--modes default,mmap] [--quick]

The training script of ``overhead.py`` (tiny: ~1 ms steps; medium: ~25 ms steps) runs
as plain ``python train.py`` and with ``torchleak.system.safe.apply_safe(mode)`` called
at its top, before torch is imported, alternately, swapping which goes first each
round. Per mode we print the median step time, the step ratio (pooled medians and the
median of per-round ratios), the timed loop's wall ratio, and how many heap trims the
safe run made (a healthy loop should make none).

``--in-process`` measures the one part of ``--safe`` that runs during training, the
trimming thread, inside one process: blocks of 200 steps alternate with the thread
running and stopped, so machine load between processes does not enter the ratio.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from overhead import MODEL, TRAIN, WORKLOADS, Workload, machine_line  # noqa: E402

SAFE_PRELUDE = '''
import atexit, json, os
from torchleak.system.safe import apply_safe, slack_trimmer
_applied = apply_safe(os.environ["SAFE_MODE"])

def _dump():
    trimmer = slack_trimmer()
    state = trimmer.state.to_dict() if trimmer else {}
    with open(os.environ["SAFE_REPORT"], "w") as fh:
        json.dump({"applied": [c.to_dict() for c in _applied], "trim": state}, fh)

atexit.register(_dump)
'''


IN_PROCESS = '''
import statistics, sys, time
import torch
from torchleak.system.trim import SlackTrimmer

width, depth, batch, blocks = (int(a) for a in sys.argv[1:5])
''' + MODEL + '''times = {False: [], True: []}
trims = 0
for block in range(blocks):
    on = block % 2 == 1
    trimmer = SlackTrimmer().start() if on else None
    for step in range(200 if width < 256 else 20):
        start = time.perf_counter()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if block >= 2:
            times[on].append(time.perf_counter() - start)
    if trimmer is not None:
        trimmer.stop()
        trims += trimmer.state.trims
off, on = statistics.median(times[False]), statistics.median(times[True])
print(f"{off * 1e3:.4f} {on * 1e3:.4f} {on / off:.4f} {trims}")
'''


def in_process(rounds: int) -> None:
    for work in WORKLOADS:
        out = subprocess.run([sys.executable, "-c", IN_PROCESS, str(work.width),
                              str(work.depth), str(work.batch), str(10 * rounds)],
                             capture_output=True, text=True, check=True,
                             env=dict(os.environ, OMP_NUM_THREADS="1"))
        off, on, ratio, trims = out.stdout.split()
        print(f"{work.name}: trimming thread off {off} ms, on {on} ms per step, "
              f"ratio {ratio}, trims {trims}")


@dataclass
class Side:
    times: list[float] = field(default_factory=list)
    round_medians: list[float] = field(default_factory=list)
    loops: list[float] = field(default_factory=list)
    trims: list[int] = field(default_factory=list)
    applied: list[dict[str, str | None]] = field(default_factory=list)


def run_once(script: Path, work: Workload, folder: Path, mode: str | None, index: int,
             side: Side) -> None:
    times_file = folder / f"times-{mode or 'plain'}-{index}.json"
    report = folder / f"safe-{mode}-{index}.json"
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1",
               SAFE_MODE=mode or "", SAFE_REPORT=str(report))
    cmd = [sys.executable, str(script if mode is None else script.with_name("safe.py")),
           str(work.width), str(work.depth), str(work.batch), str(work.steps),
           str(work.warmup), str(times_file)]
    subprocess.run(cmd, check=True, env=env, cwd=folder)
    data = json.loads(times_file.read_text())
    side.times.extend(data["times"])
    side.round_medians.append(statistics.median(data["times"]))
    side.loops.append(data["loop"])
    if mode is not None:
        safe = json.loads(report.read_text())
        side.trims.append(int(safe["trim"].get("trims", 0)))
        side.applied = safe["applied"]


def measure(work: Workload, rounds: int, folder: Path, script: Path,
            modes: list[str]) -> dict[str, Side]:
    sides: dict[str, Side] = {"plain": Side(), **{m: Side() for m in modes}}
    names = list(sides)
    for index in range(rounds):
        # Rotate who goes first each round so drifts in machine load cancel out.
        order = names[index % len(names):] + names[:index % len(names)]
        for name in order:
            run_once(script, work, folder, None if name == "plain" else name, index,
                     sides[name])
    return sides


def summary(sides: dict[str, Side]) -> list[str]:
    med = statistics.median
    plain = sides["plain"]
    lines = [f"  {'plain':10s} step {1000 * med(plain.times):8.3f} ms"]
    for name, side in sides.items():
        if name == "plain":
            continue
        pooled = med(side.times) / med(plain.times)
        rounds = med(s / p for s, p in zip(side.round_medians, plain.round_medians))
        loop = med(s / p for s, p in zip(side.loops, plain.loops))
        settings = ", ".join(f"{c['setting']}={c['value']}" for c in side.applied)
        lines.append(f"  {name:10s} step {1000 * med(side.times):8.3f} ms  ratio pooled "
                     f"{pooled:.3f}  rounds {rounds:.3f}  loop wall {loop:.3f}  "
                     f"trims/run {med(side.trims):g}  [{settings}]")
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="runs of each side (default 5)")
    parser.add_argument("--modes", default="default,mmap",
                        help="--safe modes to compare with plain (default: default,mmap)")
    parser.add_argument("--quick", action="store_true", help="2 rounds, a third of the steps")
    parser.add_argument("--only", choices=("tiny", "medium"), help="one workload")
    parser.add_argument("--in-process", action="store_true",
                        help="the trimming thread's cost, measured inside one process")
    args = parser.parse_args()
    print(machine_line(), flush=True)
    rounds = 2 if args.quick else args.rounds
    if args.in_process:
        in_process(rounds)
        return 0
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    with tempfile.TemporaryDirectory(prefix="torchleak-safe-cost-") as tmp:
        folder = Path(tmp)
        script = folder / "train.py"
        script.write_text(TRAIN)
        script.with_name("safe.py").write_text(SAFE_PRELUDE + TRAIN)
        for work in WORKLOADS:
            if args.only and not work.name.startswith(args.only):
                continue
            if args.quick:
                work = Workload(work.name, work.width, work.depth, work.batch,
                                work.steps // 3, work.warmup)
            sub = folder / work.name.split()[0]
            sub.mkdir()
            sides = measure(work, rounds, sub, script, modes)
            print(f"\n{work.name}: {work.steps} timed steps x {rounds} rounds per side")
            print("\n".join(summary(sides)), flush=True)
    print(f"\n# load at the end {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
