"""``torchleak ls``: the runs in the runs folder, oldest first, newest last."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

HELP = "list recorded runs"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--runs-dir", type=Path, default=None,
                        help="runs folder (default: $TORCHLEAK_RUNS_DIR or ./torchleak-runs)")
    parser.add_argument("--format", "-f", choices=("table", "json"), default="table",
                        help="output format (default: table)")


def execute(args: argparse.Namespace) -> int:
    from torchleak.analysis.runs import summarize
    from torchleak.trace.catalog import find_runs, runs_dir
    from torchleak.views.runs_table import runs_json, runs_table

    folder = runs_dir(args.runs_dir)
    runs = sorted((summarize(r) for r in find_runs(folder)),
                  key=lambda r: (r.start_time or 0.0, r.path.as_posix()))
    if args.format == "json":
        sys.stdout.write(runs_json(runs))
        return 0
    if not runs:
        print(f"no runs in {folder}: record one with `torchleak run train.py` "
              "(or set --runs-dir / $TORCHLEAK_RUNS_DIR)", file=sys.stderr)
        return 0
    sys.stdout.write(runs_table(runs))
    return 0
