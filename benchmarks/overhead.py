"""How much slower does ``torchleak run`` make a training step? (a script, not a test)

    python benchmarks/overhead.py [--rounds 5] [--quick] [--device cuda]

For each workload, the same training script runs alternately as ``python train.py``
(plain) and ``torchleak run --quiet train.py`` (monitored), ``--rounds`` times each, so
both see the same machine load. The script times every step after warm-up with
``time.perf_counter`` (forward, backward and ``optimizer.step()``, where torchleak's
boundary hook runs) and writes the times to a file. We print:

- step ratio: median monitored step time / median plain step time (all rounds pooled),
  and the median of the per-round ratios;
- loop wall ratio: the timed loop's total wall time, monitored / plain (median of rounds),
  which includes the rare expensive probes (census, holder walk) that medians ignore;
- process wall ratio: the whole ``python``/``torchleak run`` process, start-up and
  end-of-run analysis included;
- from the trace: torchleak's own time per boundary (``steps.monitor_ms``) and the time
  spent in expensive probes (``meta.monitor_seconds``).

Workloads (calibrated on a 2-core VM, ``torch.set_num_threads(1)``): ``tiny`` is an MLP
with ~1 ms steps, ``medium`` a wider MLP with ~30 ms steps, ``rollout`` a deeper MLP's
forward calls under ``no_grad`` with no optimizer (each call is a step: the forward-call
boundary). With ``--device cuda`` the same
models train on the GPU and each step ends with ``torch.cuda.synchronize()``, so a step's
time holds its kernels and torchleak's reads of the caching allocator.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

# The model, optimizer and batch every workload script builds (needs width, depth, batch).
MODEL = '''
torch.manual_seed(0)
torch.set_num_threads(1)
layers = [torch.nn.Linear(64, width), torch.nn.ReLU()]
for _ in range(depth - 1):
    layers += [torch.nn.Linear(width, width), torch.nn.ReLU()]
model = torch.nn.Sequential(*layers, torch.nn.Linear(width, 10)).to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
x = torch.randn(batch, 64, device=device)
y = torch.randint(0, 10, (batch,), device=device)
'''

TRAIN = '''
import json
import sys
import time

import torch

width, depth, batch, steps, warmup = (int(a) for a in sys.argv[1:6])
out, device, kind = sys.argv[6], sys.argv[7], sys.argv[8]
sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
''' + MODEL + '''times = []
loop_start = None
for step in range(warmup + steps):
    if step == warmup:
        loop_start = time.perf_counter()
    start = time.perf_counter()
    if kind == "rollout":  # no optimizer step: a step is one forward call
        with torch.no_grad():
            model(x)
    else:
        loss = torch.nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    sync()
    if step >= warmup:
        times.append(time.perf_counter() - start)
loop = time.perf_counter() - loop_start
with open(out, "w") as fh:
    json.dump({"times": times, "loop": loop}, fh)
'''


@dataclass(frozen=True)
class Workload:
    name: str
    width: int
    depth: int
    batch: int
    steps: int
    warmup: int
    device: str = "cpu"
    kind: str = "train"  # or "rollout": forward calls only, no optimizer


WORKLOADS = (
    Workload("tiny (~1 ms steps)", width=128, depth=2, batch=64, steps=3000, warmup=100),
    Workload("medium (~30 ms steps)", width=512, depth=3, batch=448, steps=150, warmup=10),
    Workload("rollout (forward only, no optimizer, 13 modules)", width=128, depth=6,
             batch=64, steps=3000, warmup=100, kind="rollout"),
)


@dataclass
class Side:
    step_times: list[float] = field(default_factory=list)
    round_medians: list[float] = field(default_factory=list)
    loops: list[float] = field(default_factory=list)
    walls: list[float] = field(default_factory=list)
    monitor_ms: list[float] = field(default_factory=list)
    probe_seconds: list[float] = field(default_factory=list)


def run_once(script: Path, work: Workload, folder: Path, monitored: bool, index: int,
             side: Side, source: Path | None = None) -> None:
    """``source``: another tree's ``src`` folder to record with (a baseline)."""
    times_file = folder / f"times-{'mon' if monitored else 'plain'}-{index}.json"
    args = [str(script), str(work.width), str(work.depth), str(work.batch), str(work.steps),
            str(work.warmup), str(times_file), work.device, work.kind]
    out = folder / f"run-{index}"
    if monitored:
        cmd = [sys.executable, "-m", "torchleak", "run", "--quiet", "--out", str(out), *args]
    else:
        cmd = [sys.executable, *args]
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    if source is not None:
        env["PYTHONPATH"] = str(source)
    start = time.perf_counter()
    subprocess.run(cmd, check=True, env=env, cwd=folder)
    side.walls.append(time.perf_counter() - start)
    data = json.loads(times_file.read_text())
    side.step_times.extend(data["times"])
    side.round_medians.append(statistics.median(data["times"]))
    side.loops.append(data["loop"])
    if monitored:
        conn = sqlite3.connect(out / "trace.sqlite")
        per_step = [r[0] for r in conn.execute(
            "SELECT monitor_ms FROM steps WHERE step > ?", (work.warmup,))]
        side.monitor_ms.append(statistics.median(per_step))
        spent = conn.execute("SELECT value FROM meta WHERE key = 'monitor_seconds'").fetchone()
        side.probe_seconds.append(json.loads(spent[0]) if spent else float("nan"))
        conn.close()


def measure(work: Workload, rounds: int, folder: Path, script: Path,
            noise: bool = False, baseline: Path | None = None) -> dict[str, float]:
    """``noise``: both sides plain (an A/A run), to see what ratio the machine's own
    noise produces. ``baseline``: another tree's ``src``, recorded in the same rounds."""
    plain, monitored, base = Side(), Side(), Side()
    for index in range(rounds):
        # Alternate, and rotate who goes first each round, so drifts in load cancel out.
        sides = ["plain", "monitored"] + (["baseline"] if baseline is not None else [])
        shift = index % len(sides)
        for name in sides[shift:] + sides[:shift]:
            if name == "plain":
                run_once(script, work, folder, False, index, plain)
            elif name == "monitored":  # or plain again in an A/A run
                run_once(script, work, folder, not noise, index + 1000, monitored)
            else:
                run_once(script, work, folder, True, index + 2000, base, baseline)
    result = _ratios(plain, monitored, noise)
    if baseline is not None:
        result.update({f"baseline {k}": v for k, v in _ratios(plain, base, False).items()
                       if not k.startswith("plain")})
    return result


def _ratios(plain: Side, monitored: Side, noise: bool) -> dict[str, float]:
    med = statistics.median
    if noise:
        return {"A/A step ratio (pooled medians)": med(monitored.step_times) / med(
            plain.step_times), "A/A step ratio (median of rounds)": med(
            m / p for m, p in zip(monitored.round_medians, plain.round_medians)),
            "A/A loop wall ratio": med(m / p for m, p in zip(monitored.loops, plain.loops))}
    return {
        "plain step ms": 1000 * med(plain.step_times),
        "monitored step ms": 1000 * med(monitored.step_times),
        "step ratio (pooled medians)": med(monitored.step_times) / med(plain.step_times),
        "step ratio (median of rounds)": med(
            m / p for m, p in zip(monitored.round_medians, plain.round_medians)),
        "loop wall ratio": med(m / p for m, p in zip(monitored.loops, plain.loops)),
        "process wall ratio": med(m / p for m, p in zip(monitored.walls, plain.walls)),
        "plain process s": med(plain.walls),
        "monitored process s": med(monitored.walls),
        "torchleak ms per boundary (median)": med(monitored.monitor_ms),
        "expensive probes s per run": med(monitored.probe_seconds),
    }


def machine_line() -> str:
    """When, where and under what load a benchmark ran: the first line it prints."""
    import torch

    return (f"# {time.strftime('%Y-%m-%d %H:%M')}  {platform.node()}  {os.cpu_count()} "
            f"cores  Python {platform.python_version()}  torch {torch.__version__}  "
            f"load {os.getloadavg()[0]:.2f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="runs of each side (default 5)")
    parser.add_argument("--quick", action="store_true", help="2 rounds, fewer steps")
    parser.add_argument("--only", choices=("tiny", "medium", "rollout"), help="one workload")
    parser.add_argument("--noise", action="store_true",
                        help="A/A: plain against plain, the noise floor of this machine")
    parser.add_argument("--baseline", type=Path, metavar="SRC",
                        help="another tree's src folder, recorded in the same rounds "
                             "(before/after figures side by side)")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                        help="where the models train (default cpu)")
    args = parser.parse_args()
    print(machine_line(), flush=True)
    rounds = 2 if args.quick else args.rounds
    with tempfile.TemporaryDirectory(prefix="torchleak-overhead-") as tmp:
        folder = Path(tmp)
        script = folder / "train.py"
        script.write_text(TRAIN)
        for work in WORKLOADS:
            if args.only and not work.name.startswith(args.only):
                continue
            work = replace(work, device=args.device)
            if args.quick:
                work = replace(work, steps=work.steps // 3)
            sub = folder / work.name.split()[0]
            sub.mkdir()
            result = measure(work, rounds, sub, script, args.noise, args.baseline)
            print(f"\n{work.name} on {work.device}: {work.steps} timed steps x {rounds} "
                  "rounds per side")
            for key, value in result.items():
                print(f"  {key:38s} {value:10.4f}")
    print(f"\n# load at the end {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
