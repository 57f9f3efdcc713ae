"""``torchleak query RUN "SQL"``: read-only SQL against a run's trace."""

from __future__ import annotations

import argparse
import csv
import io
import json
import sys
from pathlib import Path

HELP = "run read-only SQL against a run's trace"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Run one read-only SQL statement against a run's trace. The view torch_trace (also "
        "reachable as python.torch_trace) has one row per step: step, epoch, phase, time, "
        "duration_ms, allocated, reserved, rss, uss, peak_allocated, workers_uss (MiB). "
        "Tables: steps, process_samples, heap_samples, cuda_samples, census, census_tensors, "
        "census_types, holders, holder_walks, marks, events, findings, breakdown, meta.")
    parser.add_argument("run", help="run folder, its trace.sqlite, or a run name in the runs folder")
    parser.add_argument("sql", help='the query, e.g. "SELECT step, allocated FROM python.torch_trace"')
    parser.add_argument("--format", "-f", choices=("table", "csv", "json"), default="table",
                        help="output format (default: table)")
    parser.add_argument("--timeout", type=float, default=60.0, metavar="SECONDS",
                        help="stop a query that runs longer (default 60)")
    parser.add_argument("--rank", type=int, default=None,
                        help="which rank's trace, for a run of several ranks (default: 0)")
    parser.add_argument("--runs-dir", type=Path, default=None,
                        help="runs folder for run names (default: $TORCHLEAK_RUNS_DIR or ./torchleak-runs)")


def execute(args: argparse.Namespace) -> int:
    from torchleak.errors import UsageError
    from torchleak.trace.catalog import resolve_run
    from torchleak.trace.query import run_query
    from torchleak.views.tabular import format_table

    if not args.timeout > 0:
        raise UsageError(f"--timeout must be positive, got {args.timeout}")
    run = resolve_run(args.run, args.runs_dir)
    traces = {run.rank_of(t): t for t in run.traces}
    trace = traces.get(args.rank, run.traces[0]) if args.rank is not None else run.traces[0]
    if args.rank is not None and args.rank not in traces:
        raise UsageError(f"no rank {args.rank} in {run.path}: ranks "
                         f"{', '.join(str(r) for r in traces)}")
    result = run_query(trace, args.sql, timeout=args.timeout)
    if args.format == "csv":
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        writer.writerow(result.columns)
        writer.writerows(result.rows)
        sys.stdout.write(buffer.getvalue())
    elif args.format == "json":
        sys.stdout.write(json.dumps([dict(zip(result.columns, row)) for row in result.rows],
                                    indent=2, default=str) + "\n")
    else:
        count = len(result.rows)
        sys.stdout.write(format_table(result.columns, result.rows,
                                      f"({count} row{'s' if count != 1 else ''})"))
    if result.truncated:
        print("torchleak: only the first 1,000,000 rows are shown", file=sys.stderr)
    return 0
