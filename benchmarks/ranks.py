"""A job of many ranks: how long `report`, `ls` and `top --once` take on its folder.

    python benchmarks/ranks.py [--ranks 64 256 1024] [--steps 100000] [--leaking 5]
                               [--state killed|finished] [--source DIR] [--work DIR]

The rank traces are built from a real one: a 2-rank job recorded with
``torchrun --nproc_per_node=2 -m torchleak run`` (rank 1 keeps every step's loss with its
graph, rank 0 is flat), or ``--source DIR`` for one recorded before. Each of its two
traces is stretched to ``--steps`` steps (the steps table repeats its second half, the
leaking rank's memory keeps growing at the rate it was measured to grow, the flat rank's
stays flat) and copied to every rank folder of an N-rank job, ``--leaking`` of them from
the leaking rank. ``--state killed`` (the default) makes every rank a killed one: its
stored final report is removed and its status left at 'running' with no live writer, as
after a kill -9; the live detector's last judgement (written a few steps before the
kill) stays in the trace, as it would; ``--state unjudged`` removes it too (killed before the
detector's first pass), so that every rank is analysed.

For each job it prints the wall time and peak memory (the process and its workers, summed)
of ``report DIR``, ``report DIR --format json``, ``report DIR -o page.html``, ``ls`` and
``top --once DIR``, the sizes of their outputs, and whether the report named exactly the
leaking ranks; for a finished job, also the time rank 0 takes at the end of the job to
wait for the ranks and merge them into its summary (``live.ranks.run_summary``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil

from torchleak.trace.tables import STEPS

LOOP = """
import torch
import torch.distributed as dist
from torch import nn

dist.init_process_group("gloo")
rank = dist.get_rank()
torch.manual_seed(rank)
model = nn.parallel.DistributedDataParallel(nn.Linear(32, 4))
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
kept = []
for _ in range(400):
    loss = model(torch.randn(16, 32)).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if rank == 1:
        kept.append(loss)
dist.destroy_process_group()
"""


MERGE = """
import sys, time
from pathlib import Path
import torch
from torchleak.live.ranks import run_summary
start = time.perf_counter()
run_summary(Path(sys.argv[1]), int(sys.argv[2]), appear=0, finish=0)
print(time.perf_counter() - start)
"""


def record(work: Path) -> Path:
    """A real 2-rank job: rank 1 leaks."""
    (work / "loop.py").write_text(LOOP)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore"}
    subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2", "-m",
                    "torchleak", "run", "--quiet", "--out", "source", "loop.py"], cwd=work,
                   env=env, check=True, capture_output=True, timeout=600)
    return work / "source"


def stretch(source: Path, target: Path, steps: int, grows: bool, killed: bool,
            judged: bool = True) -> None:
    """``source`` copied to ``target``, ``steps`` long, finished or killed (``judged``: with
    the live detector's judgement)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source, target)
    conn = sqlite3.connect(target)
    first, last = conn.execute("SELECT MIN(step), MAX(step) FROM steps").fetchone()
    period = max(1, (last - first + 1) // 2)
    base = last - period  # the pattern: the second half of the recorded steps
    start_uss, end_uss = conn.execute(
        "SELECT (SELECT uss FROM steps WHERE step = ?), (SELECT uss FROM steps WHERE step = ?)",
        (base + 1, last)).fetchone()
    rate = max((end_uss - start_uss) / period, 1024.0) if grows else 0.0
    # Every column of the steps table as declared, copied from the repeated step but for
    # the step itself, its time and the memory that keeps growing.
    grown = {"step": "k.i", "t": "s.t + (k.i - s.step) * 0.001",
             "rss": "s.rss + CAST(:rate * (k.i - s.step) AS INTEGER)",
             "uss": "s.uss + CAST(:rate * (k.i - s.step) AS INTEGER)"}
    conn.execute(
        "WITH RECURSIVE k(i) AS (SELECT :first UNION ALL SELECT i + 1 FROM k WHERE i < :steps) "
        f"INSERT INTO steps ({', '.join(STEPS.names)}) "
        f"SELECT {', '.join(grown.get(name, 's.' + name) for name in STEPS.names)} "
        "FROM k JOIN steps s ON s.step = :base + 1 + ((k.i - :base - 1) % :period)",
        {"first": last + 1, "steps": steps, "rate": rate, "base": base, "period": period})
    # The detector's last pass just before the end, the final report at it.
    conn.execute("UPDATE judgements SET step = ? WHERE phase = 'live'", (steps - 5,))
    conn.execute("UPDATE judgements SET step = ?, report = json_set(report, '$.steps', ?) "
                 "WHERE phase = 'final'", (steps, steps))
    if not judged:
        conn.execute("DELETE FROM judgements WHERE phase = 'live'")
    if killed:
        conn.execute("DELETE FROM judgements WHERE phase = 'final'")
        conn.execute("DELETE FROM meta WHERE key IN ('end_time', 'exit_code')")
        conn.execute("UPDATE meta SET value = '\"running\"' WHERE key = 'status'")
    conn.commit()
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    for extra in ("-wal", "-shm"):
        Path(f"{target}{extra}").unlink(missing_ok=True)
    (target.parent / "trace.lock").touch()  # the dead writer's lock: nobody holds it


def build_job(templates: dict[bool, Path], folder: Path, ranks: int, leaking: list[int]) -> None:
    for rank in range(ranks):
        target = folder / f"rank{rank}" / "trace.sqlite"
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(templates[rank in leaking], target)
        (target.parent / "trace.lock").touch()


def timed(argv: list[str], cwd: Path) -> tuple[float, float, str]:
    """Wall seconds, peak memory (the process tree's RSS summed) and stdout of a command."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    peak = [0.0]
    done = threading.Event()

    def sample() -> None:
        root = psutil.Process(proc.pid)
        while not done.is_set():
            try:
                tree = [root, *root.children(recursive=True)]
                peak[0] = max(peak[0], sum(p.memory_info().rss for p in tree))
            except psutil.Error:
                pass
            done.wait(0.05)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    out, err = proc.communicate()
    seconds = time.perf_counter() - start
    done.set()
    sampler.join()
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({proc.returncode}): {err[-2000:]}")
    return seconds, peak[0], out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ranks", type=int, nargs="+", default=[64, 256, 1024])
    parser.add_argument("--steps", type=int, default=100_000)
    parser.add_argument("--leaking", type=int, default=5)
    parser.add_argument("--state", choices=("killed", "finished", "unjudged"), default="killed",
                        help="unjudged: killed before the live detector's first pass, so "
                             "every rank is analysed")
    parser.add_argument("--source", type=Path, default=None,
                        help="a 2-rank job folder (rank 1 leaks) recorded before")
    parser.add_argument("--work", type=Path, default=None, help="where to build (kept)")
    args = parser.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="torchleak-ranks-"))
    work.mkdir(parents=True, exist_ok=True)
    source = args.source or record(work)
    killed = args.state != "finished"
    templates = {grows: work / "templates" / f"{'leak' if grows else 'flat'}-{args.state}.sqlite"
                 for grows in (False, True)}
    for grows, target in templates.items():
        stretch(source / f"rank{int(grows)}" / "trace.sqlite", target, args.steps, grows, killed,
                judged=args.state != "unjudged")
    size = templates[False].stat().st_size
    print(f"rank traces of {args.steps:,} steps ({size / 2**20:.1f} MiB each), {args.state}, "
          f"{os.cpu_count()} cores, in {work}")
    tl = [sys.executable, "-m", "torchleak"]
    for ranks in args.ranks:
        count = min(args.leaking, ranks)
        leaking = sorted({(i * ranks) // count + (3 if ranks > 8 else 1) for i in range(count)})
        leaking = [r % ranks for r in leaking]
        parent = work / f"jobs-{ranks}"
        folder = parent / "job"
        if not folder.exists():
            build_job(templates, folder, ranks, leaking)
        print(f"\n{ranks} ranks, leaking: {leaking}")
        seconds, peak, text = timed([*tl, "report", str(folder)], work)
        print(f"  report (text)   {seconds:6.1f} s  {peak / 2**20:6.0f} MiB  "
              f"{len(text.splitlines())} lines")
        seconds, peak, out = timed([*tl, "report", str(folder), "--format", "json"], work)
        named = sorted(r["rank"] for r in json.loads(out)["ranks"])
        print(f"  report (json)   {seconds:6.1f} s  {peak / 2**20:6.0f} MiB  "
              f"{len(out.encode()) / 1024:.0f} KiB, names ranks {named}: "
              f"{'exactly the leaking ones' if named == leaking else 'WRONG'}")
        page = parent / "report.html"
        seconds, peak, _ = timed([*tl, "report", str(folder), "-o", str(page)], work)
        print(f"  report (html)   {seconds:6.1f} s  {peak / 2**20:6.0f} MiB  "
              f"{page.stat().st_size / 1024:.0f} KiB")
        seconds, peak, out = timed([*tl, "ls", "--runs-dir", str(parent)], work)
        print(f"  ls              {seconds:6.1f} s  {peak / 2**20:6.0f} MiB  "
              f"{out.splitlines()[2].split('|')[3].strip()!r}")
        seconds, peak, out = timed([*tl, "top", "--once", str(folder)], work)
        print(f"  top --once      {seconds:6.1f} s  {peak / 2**20:6.0f} MiB  "
              f"{len(out.splitlines())} lines")
        if not killed:  # rank 0's end-of-job summary, in a process that has torch loaded
            _, _, out = timed([sys.executable, "-c", MERGE, str(folder), str(ranks)], work)
            print(f"  rank 0's merge  {float(out):6.2f} s (its wait and summary)")


if __name__ == "__main__":
    main()
