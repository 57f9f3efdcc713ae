"""What does ``torchleak attach`` cost? (a script, not a test)

    python benchmarks/attach_latency.py [--steps 3000] [--requests 200]

1. Nobody attached: the same loop (``torchleak.watch()`` steps, no torch) runs under
   ``torchleak run`` with the control socket served and with ``TORCHLEAK_CONTROL=off``,
   alternately, ``--rounds`` times. The script times each ``step()`` call (torchleak's
   boundary, where the request queue is checked) and reads the CPU time the control
   server's thread used during the whole run.
2. Latency: a client connected to a live run sends ``--requests`` ``eval "1"`` commands
   one after the other, for loops whose steps take ~1 ms and ~20 ms. We print the round
   trip seen by the client, the wait for the boundary and the run time on the training
   thread, as the run reports them.
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
from pathlib import Path

LOOP = '''
import json, os, sys, threading, time
import torchleak

steps, step_seconds, out = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
watch = torchleak.watch()
times = []
deadline_file = out + ".stop"
step = 0
while step < steps or (steps == 0 and not os.path.exists(deadline_file)):
    step += 1
    end = time.perf_counter() + step_seconds
    while time.perf_counter() < end:  # a step of work, on the CPU
        pass
    start = time.perf_counter()
    watch.step()
    times.append(time.perf_counter() - start)
control = next((t for t in threading.enumerate() if t.name == "torchleak-control"), None)
ticks = None
if control is not None:
    with open(f"/proc/self/task/{control.native_id}/stat") as handle:
        fields = handle.read().rsplit(")", 1)[1].split()
    ticks = int(fields[11]) + int(fields[12])  # utime + stime, in clock ticks
with open(out, "w") as handle:
    json.dump({"step_us": sorted(t * 1e6 for t in times), "control_ticks": ticks}, handle)
'''


def run_loop(folder: Path, steps: int, step_seconds: float, control: str) -> dict:
    script = folder / "loop.py"
    script.write_text(LOOP)
    out = folder / f"result-{control}.json"
    env = dict(os.environ, TORCHLEAK_CONTROL=control)
    subprocess.run([sys.executable, "-m", "torchleak", "run", "--quiet", "--out",
                    str(folder / f"run-{control}-{time.monotonic_ns()}"), str(script),
                    str(steps), str(step_seconds), str(out)], check=True, env=env)
    return json.loads(out.read_text())


def idle_cost(rounds: int, steps: int) -> None:
    print(f"nobody attached: {steps} steps of ~1 ms, {rounds} rounds each, alternating")
    pooled: dict[str, list[float]] = {"on": [], "off": []}
    ticks = []
    with tempfile.TemporaryDirectory() as tmp:
        for index in range(rounds):
            for control in (("on", "off") if index % 2 == 0 else ("off", "on")):
                result = run_loop(Path(tmp), steps, 0.001, "1" if control == "on" else "off")
                pooled[control] += result["step_us"]
                if control == "on":
                    ticks.append(result["control_ticks"])
    for control, values in pooled.items():
        print(f"  control {control:3}: step() median {statistics.median(values):.2f} us, "
              f"p90 {values[int(len(values) * 0.9)]:.2f} us ({len(values)} steps)")
    tick = os.sysconf("SC_CLK_TCK")
    print(f"  control thread CPU over each whole run: {ticks} ticks (1 tick = {1000 / tick:g} ms)")


def latency(requests: int) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
    from torchleak.commands.attach_client import AttachTarget, Client

    for step_ms in (1.0, 20.0):
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            (folder / "loop.py").write_text(LOOP)
            out = folder / "result.json"
            run = folder / "run"
            proc = subprocess.Popen([sys.executable, "-m", "torchleak", "run", "--quiet",
                                     "--out", str(run), str(folder / "loop.py"), "0",
                                     str(step_ms / 1000), str(out)])
            while not (run / "control.sock").exists():
                time.sleep(0.05)
            trips, waits, runs = [], [], []
            with Client(AttachTarget(run)) as client:
                client.request("eval", 10, code="1")  # the first boundary after start-up
                for _ in range(requests):
                    start = time.perf_counter()
                    reply = client.request("eval", 10, code="1")
                    trips.append((time.perf_counter() - start) * 1000)
                    waits.append(reply["waited_ms"])
                    runs.append(reply["ms"])
            Path(f"{out}.stop").touch()
            proc.wait(timeout=60)
        trips.sort()
        print(f"steps of ~{step_ms:g} ms, {requests} evals: round trip median "
              f"{statistics.median(trips):.2f} ms (p90 {trips[int(len(trips) * 0.9)]:.2f}, "
              f"max {trips[-1]:.2f}); wait for the boundary median "
              f"{statistics.median(waits):.2f} ms; run on the training thread median "
              f"{statistics.median(runs):.3f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=3000)
    parser.add_argument("--requests", type=int, default=200)
    args = parser.parse_args()
    idle_cost(args.rounds, args.steps)
    latency(args.requests)


if __name__ == "__main__":
    main()
