"""``torchleak top [RUN]``: watch a running trace live; exits when the run ends or on Ctrl-C."""

from __future__ import annotations

import argparse
from pathlib import Path

HELP = "watch a running trace live"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run", nargs="?", default=None,
                        help="run folder or trace.sqlite (default: the newest run)")
    parser.add_argument("--runs-dir", type=Path, default=None,
                        help="runs folder (default: $TORCHLEAK_RUNS_DIR or ./torchleak-runs)")
    parser.add_argument("--interval", "-n", type=float, default=0.5,
                        help="seconds between refreshes (default: 0.5)")
    parser.add_argument("--once", action="store_true", help="print one frame and exit")


def execute(args: argparse.Namespace) -> int:
    from torchleak.errors import UsageError
    from torchleak.views.runs import resolve_run
    from torchleak.views.top import watch

    if not 0.05 <= args.interval <= 3600:
        raise UsageError(f"--interval must be between 0.05 and 3600 seconds, got {args.interval}")
    return watch(resolve_run(args.run, args.runs_dir), interval=args.interval, once=args.once)
