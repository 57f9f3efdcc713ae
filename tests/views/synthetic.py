"""Synthetic traces written with the real TraceWriter (the recorder's own code path).

CUDA rows are fakes: CI has no GPU. Everything else mirrors what `torchleak run` writes.
"""

from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path
from typing import Any

import psutil

from torchleak.trace.writer import TraceWriter

MIB = 1024 * 1024
LEAK_PER_STEP = 256 * 1024


def finding_dict(steps: int) -> dict[str, Any]:
    return {
        "kind": "tensor_growth",
        "culprit": "Trainer.losses (list)",
        "severity": "high",
        "fix": "append loss.item() (a float) instead of loss",
        "signal": "main_uss",
        "bytes_per_step": float(LEAK_PER_STEP),
        "detected_at_step": 30,
        "retained_bytes": LEAK_PER_STEP * steps,
        "holder_path": "__main__.trainer.losses",
        "source": "train.py:42",
        "evidence": ["len(Trainer.losses) +1 per step", "each item holds a grad_fn graph"],
        # USS ends at 215 MiB and grows 0.25 MiB/step: 70 steps to a 232.5 MiB limit.
        "oom": {"limit_bytes": int(232.5 * MIB), "limit_name": "cgroup memory.max",
                "current_bytes": 215 * MIB, "steps_to_oom": 70.0, "seconds_to_oom": 7.0},
    }


def report_dict(steps: int, leak: bool) -> dict[str, Any]:
    signals = [{"name": "main_uss", "unit": "bytes", "verdict": "growing" if leak else "healthy",
                "slope_per_step": float(LEAK_PER_STEP) if leak else 0.0}]
    return {"verdict": "leak" if leak else "no_leak", "steps": steps,
            "findings": [finding_dict(steps)] if leak else [], "signals": signals,
            "reason": "main USS grows linearly" if leak else "all signals flat", "run": {}}


def write_steps(writer: TraceWriter, first: int, last: int, leak: bool, cuda: bool, t0: float) -> None:
    for step in range(first, last + 1):
        grow = LEAK_PER_STEP * step if leak else (step % 3) * 4096
        t = t0 + step * 0.1
        epoch = (step - 1) // 20
        writer.add("steps", (step, t, 100.0, epoch, "train", 320 * MIB + grow, 200 * MIB + grow,
                             None, step % 700, 0.05))
        if step % 5 == 0:
            for i, pid in enumerate((90001, 90002)):
                writer.add("process_samples", (step, t, pid, "worker", 40 * MIB, (20 + i) * MIB, 30 * MIB))
        if cuda:
            writer.add("cuda_samples", (step, 0, 64 * MIB + grow // 4, 128 * MIB, None, None,
                                        80 * MIB, 128 * MIB, 0, 0, 15 * 1024 * MIB, 16 * 1024 * MIB))
        if step % 10 == 0:
            writer.add("census", (step, t, 3.0, "schedule", 100 + (step if leak else 0),
                                  8 * MIB + (grow // 2), step if leak else 0, 4 * step if leak else 0,
                                  grow // 4, 250000))
        if step % 20 == 0:
            writer.add("marks", (step, t, "epoch", str(step // 20)))
            writer.add("marks", (step, t, "validation_start", None))
            writer.add("marks", (step, t + 0.05, "validation_end", None))


def make_trace(folder: Path, steps: int = 60, leak: bool = True, status: str = "finished",
               report: bool = True, cuda: bool = True, name: str = "synthetic",
               pid: int | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "trace.sqlite"
    writer = TraceWriter(path)
    t0 = time.time() - steps * 0.1
    if status == "running" and pid is None:
        # Our own pid plays the live writer: the run cannot predate it (a recycled pid).
        t0 = psutil.Process().create_time()
    meta = {"name": name, "script": "train.py", "argv": ["train.py", "--epochs", "3"],
            "status": status, "pid": pid if pid is not None else os.getpid(),
            "start_time": t0, "steps": steps, "ram_total": 64 * 1024 * MIB,
            "python": "3.11", "torch": "2.13.0+cpu", "devices": ["cpu"]}
    if status != "running":
        meta.update(end_time=t0 + steps * 0.1, exit_code=0)
    for key, value in meta.items():
        writer.set_meta(key, value)
    write_steps(writer, 1, steps, leak, cuda, t0)
    if report and status != "running":
        writer.set_meta("report", report_dict(steps, leak))
    writer.close()
    return path


def folder_fingerprint(folder: Path) -> dict[str, str]:
    """Names and content hashes of every file in a run folder (a view must change none)."""
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.iterdir()) if p.is_file()}
