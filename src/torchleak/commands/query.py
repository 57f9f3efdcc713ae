"""``torchleak query RUN "SQL"``: read-only SQL against a run's trace."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

HELP = "run read-only SQL against a run's trace"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Run one read-only SQL statement against a run's trace. The view torch_trace (also "
        "reachable as python.torch_trace) has one row per step: step, epoch, phase, time, "
        "duration_ms, allocated, reserved, rss, uss, peak_allocated, workers_uss (MiB). "
        "Tables: steps, process_samples, cuda_samples, census, census_tensors, census_types, "
        "holders, marks, events, findings, meta.")
    parser.add_argument("run", help="run folder, its trace.sqlite, or a run name in the runs folder")
    parser.add_argument("sql", help='the query, e.g. "SELECT step, allocated FROM python.torch_trace"')
    parser.add_argument("--format", "-f", choices=("table", "csv", "json"), default="table",
                        help="output format (default: table)")
    parser.add_argument("--runs-dir", type=Path, default=None,
                        help="runs folder for run names (default: $TORCHLEAK_RUNS_DIR or ./torchleak-runs)")


def execute(args: argparse.Namespace) -> int:
    from torchleak.views.query import format_result, run_query
    from torchleak.views.runs import resolve_run

    result = run_query(resolve_run(args.run, args.runs_dir), args.sql)
    sys.stdout.write(format_result(result, args.format))
    return 0
