"""Synthetic traces written with the real TraceWriter (the recorder's own code path), and
analysed by the real analysis, as the engine does at the end of a run.

CUDA rows are fakes: CI has no GPU. Everything else mirrors what `torchleak run` writes:
a main process whose USS grows 256 KiB a step when ``leak``, held by ``Trainer.losses``.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path

import psutil

from torchleak.trace.judgements import judgement_row
from torchleak.trace.writer import TraceWriter, WriterLock

MIB = 1024 * 1024
LEAK_PER_STEP = 256 * 1024
LIMIT = 280 * MIB  # the cgroup limit the leak heads for: main + workers reach it ~96 steps after 60


def write_steps(writer: TraceWriter, first: int, last: int, leak: bool, cuda: bool, t0: float) -> None:
    for step in range(first, last + 1):
        grow = LEAK_PER_STEP * step if leak else (step % 3) * 4096
        t = t0 + step * 0.1
        epoch = (step - 1) // 20
        writer.add("steps", (step, t, 100.0, epoch, "train", 320 * MIB + grow, 200 * MIB + grow,
                             step % 700, 0.05))
        if step % 5 == 0:
            for i, pid in enumerate((90001, 90002)):
                writer.add("process_samples", (step, t, pid, "worker", 40 * MIB, (20 + i) * MIB,
                                               30 * MIB))
            losses = step if leak else 4
            writer.add("holders", (step, "Trainer.losses", "container", "list", losses,
                                   losses * LEAK_PER_STEP, losses, losses * LEAK_PER_STEP,
                                   losses, None, json.dumps({"label": "Trainer.losses",
                                                             "item_type": "Tensor"})))
            writer.add("holder_walks", (step, "full", "schedule", 1.0, 1))
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
    """A trace as a run leaves it: ``report`` stores the real analysis' Report."""
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
            "cgroup_limit": LIMIT, "python": "3.11", "torch": "2.13.0+cpu", "devices": ["cpu"]}
    if status != "running":
        meta.update(end_time=t0 + steps * 0.1, exit_code=0)
    for key, value in meta.items():
        writer.set_meta(key, value)
    write_steps(writer, 1, steps, leak, cuda, t0)
    writer.flush()
    if report and status != "running" and steps:
        report = analyse(path)
        writer.judge(judgement_row("final", report.steps, report.to_dict()))
    writer.close()
    return path


def analyse(path: Path):  # type: ignore[no-untyped-def]
    from torchleak.analysis import analyze

    return analyze(path)


class LiveWriter:
    """Holds a run folder's writer lock, as a live run's recorder does."""

    def __init__(self, folder: Path) -> None:
        self._lock = WriterLock(folder)

    def release(self) -> None:
        self._lock.release()


def folder_fingerprint(folder: Path) -> dict[str, str]:
    """Names and content hashes of every file in a run folder (a view must change none)."""
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.iterdir()) if p.is_file()}
