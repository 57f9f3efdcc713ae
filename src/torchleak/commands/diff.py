"""``torchleak diff RUN_A RUN_B``: did the change work? Two runs side by side."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from torchleak.errors import EXIT_LEAK, OutputNotWritable, UsageError

HELP = "compare two runs: verdicts, growth, holders, categories, peaks and cost"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Compare run B with run A (finished, killed or still running; any lengths): "
        "verdicts, measured growth per step, holders that went away or appeared, memory "
        "categories, peaks, step time and torchleak's cost, with the change in one line.")
    parser.add_argument("run_a", help="run A (before): run folder, trace.sqlite or run name")
    parser.add_argument("run_b", help="run B (after)")
    parser.add_argument("--json", metavar="FILE",
                        help="also write the comparison as JSON ('-' for standard output "
                             "instead of the table)")
    parser.add_argument("--fail-if-worse", action="store_true",
                        help=f"exit {EXIT_LEAK} when B leaks where A did not, grows faster or "
                             "peaks higher (see --rate-threshold, --peak-threshold)")
    parser.add_argument("--rate-threshold", metavar="PCT", type=float, default=25.0,
                        help="B grows faster when its growth exceeds A's by more than this "
                             "%% (and by at least 2 KiB/step; default 25)")
    parser.add_argument("--peak-threshold", metavar="PCT", type=float, default=10.0,
                        help="B peaks higher when its peak main USS exceeds A's by more "
                             "than this %% (and by at least 16 MiB; default 10)")
    parser.add_argument("--runs-dir", type=Path, default=None,
                        help="runs folder for run names (default: $TORCHLEAK_RUNS_DIR or "
                             "./torchleak-runs)")


def execute(args: argparse.Namespace) -> int:
    from torchleak.analysis.diff import Thresholds, diff_reports
    from torchleak.analysis.job import run_report
    from torchleak.trace.catalog import resolve_run
    from torchleak.views.diff import diff_json, diff_text

    for name in ("rate_threshold", "peak_threshold"):
        if not getattr(args, name) >= 0:
            raise UsageError(f"--{name.replace('_', '-')} must be a percentage >= 0")
    reports = [run_report(resolve_run(run, args.runs_dir)) for run in (args.run_a, args.run_b)]
    diff = diff_reports(*reports, thresholds=Thresholds(args.rate_threshold / 100,
                                                        args.peak_threshold / 100))
    if args.json == "-":
        sys.stdout.write(diff_json(diff))
    else:
        sys.stdout.write(diff_text(diff))
        if args.json:
            try:
                Path(args.json).write_text(diff_json(diff), encoding="utf-8")
            except OSError as err:
                raise OutputNotWritable(f"cannot write --json {args.json}: "
                                        f"{err.strerror or err}") from None
    return EXIT_LEAK if args.fail_if_worse and diff.worse else 0
