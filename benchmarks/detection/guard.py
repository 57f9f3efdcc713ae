"""The guard under a tight limit: every script of the detection benchmark runs plainly
(its peak RSS measured by the kernel), then under ``torchleak run --guard stop`` with
``--limit`` set ``--margin`` above that peak. A healthy script must complete (exit 0,
no guard); a leaky one may be stopped (exit 75), and is counted.

    python benchmarks/detection/guard.py [--margin 1.4] [--only NAME]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
SCRIPTS = HERE / "scripts"
TIMEOUT = 300
EXIT_GUARD = 75


def run(argv: list[str], work: Path) -> tuple[int, int]:
    """(exit code, peak RSS in bytes) of one child, from the kernel's own accounting."""
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1",
               TORCHLEAK_RUNS_DIR=str(work / "runs"))
    proc = subprocess.Popen(argv, cwd=SCRIPTS, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    _pid, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return proc.returncode, usage.ru_maxrss * 1024


def guard_case(entry: dict[str, Any], margin: float) -> dict[str, Any]:
    script = str(SCRIPTS / entry["script"])
    with tempfile.TemporaryDirectory(prefix="guard-") as folder:
        work = Path(folder)
        plain_rc, peak = run([sys.executable, script], work)
        limit = int(peak * margin)
        rc, guarded_peak = run([sys.executable, "-m", "torchleak", "run", "--quiet", "--guard",
                                "stop", "--limit", str(limit), "--out", str(work / "run"),
                                script], work)
    return {"script": entry["script"], "leaky": entry["leaky"], "plain_rc": plain_rc,
            "plain_peak": peak, "limit": limit, "rc": rc, "peak": guarded_peak}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--margin", type=float, default=1.4)
    parser.add_argument("--only", action="append")
    args = parser.parse_args()
    manifest = json.loads((HERE / "manifest.json").read_text())["scripts"]
    rows = [guard_case(e, args.margin) for e in manifest
            if not args.only or e["script"] in args.only]
    for row in rows:
        print(f"{row['script']:28} leaky={row['leaky']!s:5} plain peak "
              f"{row['plain_peak'] / 2**20:7.0f} MiB  limit {row['limit'] / 2**20:7.0f} MiB  "
              f"rc={row['rc']}", flush=True)
    healthy = [r for r in rows if not r["leaky"]]
    stopped = sum(r["rc"] == EXIT_GUARD for r in healthy)
    failed = sum(r["rc"] not in (0, EXIT_GUARD) for r in rows)
    print(f"healthy runs stopped by the guard under --limit {args.margin:g}x their plain "
          f"peak: {stopped}/{len(healthy)}; runs that failed otherwise: {failed}")


if __name__ == "__main__":
    main()
