"""Where one step boundary's time goes, in place: torchleak's pieces timed inside a run.

    python benchmarks/boundary_parts.py [--device cuda] [--steps 3000]

One ``torchleak run`` process trains the tiny MLP of ``overhead.py`` and wraps the
recorder's boundary (``Recorder._measure``), the CUDA watch, the CUDA probe, torch's
allocator-counter calls and the trace writer's ``add`` with timers, so each piece's time
is measured where it runs (after the step's own code, with its caches), not in a tight
loop. Printed: each piece's calls, median, mean and 90th percentile after the first sixth,
and the same counter calls in a tight loop for comparison (CUDA only). The timers add
~0.3 µs a call. ``boundary_cost.py`` gives what the whole boundary costs the step.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from boundary_cost import TINY_MODEL, record  # noqa: E402

LOOP = '''
import statistics, sys, time
import torch
from torchleak.record import cuda_watch, session
from torchleak.record.probes import cuda as cuda_probe
from torchleak.trace import writer as trace_writer

clock = time.perf_counter
device, steps = sys.argv[1], int(sys.argv[2])
times = {}


def timed(owner, name, label):
    original = getattr(owner, name)
    found = times.setdefault(label, [])

    def wrapper(*args, **kwargs):
        start = clock()
        try:
            return original(*args, **kwargs)
        finally:
            found.append(clock() - start)

    setattr(owner, name, wrapper)


timed(session.Recorder, "_measure", "the boundary (Recorder._measure)")
timed(cuda_watch.CudaWatch, "at_boundary", "CudaWatch.at_boundary")
timed(cuda_probe.CudaProbe, "sample", "CudaProbe.sample")
timed(cuda_probe, "used_devices", "used_devices")
timed(torch.cuda, "memory_stats_as_nested_dict", "memory_stats_as_nested_dict")
timed(torch.cuda, "mem_get_info", "mem_get_info")
timed(trace_writer.TraceWriter, "add", "TraceWriter.add")
sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
''' + TINY_MODEL + '''step_times = []
for _ in range(steps):
    start = clock()
    loss = torch.nn.functional.cross_entropy(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    sync()
    step_times.append(clock() - start)
print(f"{steps} steps on {device}: step median {1e6 * statistics.median(step_times[steps // 6:]):.1f} us")
for label, values in times.items():
    if values:
        kept = sorted(values[len(values) // 6:])
        print(f"  {label:34s} calls {len(values):6d}  median {1e6 * statistics.median(kept):8.1f} us"
              f"  mean {1e6 * statistics.fmean(kept):8.1f} us  p90 {1e6 * kept[int(0.9 * len(kept))]:8.1f} us")
if device == "cuda":
    start = clock()
    for _ in range(2000):
        torch.cuda.memory_stats_as_nested_dict(0)
    print(f"  memory_stats_as_nested_dict in a tight loop: {1e6 * (clock() - start) / 2000:.1f} us")
'''


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--steps", type=int, default=3000)
    args = parser.parse_args()
    print(record(LOOP, [args.device, str(args.steps)]))


if __name__ == "__main__":
    main()
