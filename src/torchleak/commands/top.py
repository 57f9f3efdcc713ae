"""``torchleak top [RUN]``: watch a running trace live; exits when the run ends or on Ctrl-C.

A run of several ranks (torchrun) shows every rank; ``--rank N`` follows one."""

from __future__ import annotations

import argparse
import sys
import time
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
    parser.add_argument("--rank", type=int, default=None, metavar="N",
                        help="follow one rank of a multi-rank (torchrun) run; without it, a "
                             "run of several ranks shows every rank")


def execute(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.live import Live

    from torchleak.analysis.follow import Follower, JobFollower
    from torchleak.analysis.job import rank_trace
    from torchleak.errors import UsageError
    from torchleak.trace.catalog import resolve_run
    from torchleak.views.top_frame import frame_text, render_frame

    if not 0.05 <= args.interval <= 3600:
        raise UsageError(f"--interval must be between 0.05 and 3600 seconds, got {args.interval}")
    run = resolve_run(args.run, args.runs_dir)
    console = Console()
    follower: Follower | JobFollower
    if args.rank is not None:
        follower = Follower(rank_trace(run, args.rank))
    elif run.ranks > 1:
        follower = JobFollower(run)
    else:
        follower = Follower(run.traces[0])
    try:
        if not console.is_terminal:
            sys.stdout.write(frame_text(follower.poll(), args.interval, follower.polled_at))
            return 0
        if args.once:
            console.print(render_frame(follower.poll(), args.interval, follower.polled_at))
            return 0
        with Live(console=console, auto_refresh=False, transient=False,
                  redirect_stdout=False, redirect_stderr=False) as live:
            while True:
                report = follower.poll()
                live.update(render_frame(report, args.interval, follower.polled_at),
                            refresh=True)
                if report.run.get("status") != "running":
                    return 0
                time.sleep(args.interval)
    except KeyboardInterrupt:
        return 0  # Ctrl-C is how one leaves top: not an error
    finally:
        follower.close()
