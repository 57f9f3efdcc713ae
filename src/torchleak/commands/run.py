"""``torchleak run [options] script.py [args...]`` / ``torchleak run [options] -m module``.

Every option that can fail is checked before the script starts; then the script runs
exactly as ``python script.py`` would, under a ``Monitor`` (the same engine as
``torchleak.monitor()``), and keeps its output, exit code and death signal.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from typing import TYPE_CHECKING

from torchleak.errors import EXIT_GUARD, EXIT_LEAK, OutputNotWritable, UsageError
from torchleak.live.runner import Target

if TYPE_CHECKING:
    from torchleak.live.engine import Monitor
    from torchleak.report import Report

HELP = "record a training script and say whether it leaks"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.usage = "torchleak run [options] (script.py | -m module) [args ...]"
    parser.add_argument("--out", metavar="DIR", help="run folder (default: "
                        "./torchleak-runs/<script>-<timestamp>/, or under $TORCHLEAK_RUNS_DIR)")
    parser.add_argument("--name", help="a name for this run (default: the script's name)")
    parser.add_argument("--budget", metavar="PCT", type=float, default=1.0,
                        help="overhead budget for expensive probes, in %% of wall time "
                             "(default 1); the live detector may take three times it")
    parser.add_argument("--limit", metavar="SIZE",
                        help="the memory limit projections and the guard use, e.g. 12GiB "
                             "(default: the cgroup's limit, else RAM)")
    parser.add_argument("--guard", choices=("warn", "checkpoint", "stop"), default="warn",
                        help="near the limit: warn (snapshot and warning), checkpoint (also "
                             "call your torchleak.on_guard functions) or stop (then end the "
                             f"training, exit code {EXIT_GUARD}); default warn")
    parser.add_argument("--guard-at", metavar="PCT", type=float, default=90.0,
                        help="the guard fires when memory passes this %% of the limit "
                             "(default 90)")
    parser.add_argument("--guard-minutes", metavar="MIN", type=float, default=10.0,
                        help="... or when the limit is projected within this many minutes "
                             "(default 10)")
    parser.add_argument("--safe", nargs="?", const="default", metavar="MODE",
                        help="apply settings that cannot change results before the script "
                             "starts (allocator settings, heap trimming, CUDA expandable "
                             "segments; MODE 'workers' also caps DataLoader workers, 'mmap' "
                             "a fixed mmap threshold; docs/safe.md)")
    parser.add_argument("--json", metavar="FILE", help="write the verdict and findings as JSON")
    parser.add_argument("--fail-on-leak", action="store_true",
                        help=f"exit {EXIT_LEAK} when a leak is found and the script succeeded")
    parser.add_argument("--quiet", "-q", action="store_true", help="print nothing of our own")
    parser.add_argument("--no-control", action="store_true",
                        help="`torchleak attach` may walk and snapshot this run but not run "
                             "code in it (--eval, --cleanup); also TORCHLEAK_CONTROL=0")
    parser.add_argument("-m", dest="module", metavar="MODULE", nargs=argparse.REMAINDER,
                        help="run a module like python -m; everything after it is its own")
    parser.add_argument("target", nargs=argparse.REMAINDER, help="script.py and its arguments")


def execute(args: argparse.Namespace) -> int:
    from torchleak.check.crossref import annotate
    from torchleak.live.engine import Monitor, MonitorOptions, rank_info
    from torchleak.live.runner import (die_like_python, freeze_startup_objects,
                                       run_target, validate)

    target = _target(args)
    validate(target)
    rank, world = rank_info()
    speaks = rank in (None, 0)  # under torchrun rank 0 alone prints, for every rank
    json_path = _json_path(args.json) if speaks else None
    options = MonitorOptions(out=args.out, name=args.name or target.stem,
                             budget=args.budget / 100, limit=args.limit, guard=args.guard,
                             guard_share=args.guard_at / 100, guard_minutes=args.guard_minutes,
                             quiet=args.quiet or not speaks, script=target.display,
                             argv=[target.display, *target.args], stream=sys.stderr,
                             annotate=annotate,
                             control=False if args.no_control else None, safe=args.safe,
                             owns_process=True)
    monitor = Monitor(options)  # validates every option before the script starts
    monitor.start()
    if not monitor.options.quiet:
        from torchleak.views.inert import shown

        monitor.say(shown(f"torchleak: recording {target.display} -> {monitor.trace}"))
        for change in monitor.safe_changes:
            monitor.say(change.line())
    freeze_startup_objects()
    outcome = run_target(target)
    report = monitor.stop("crashed" if outcome.raised else "finished", outcome.code)
    _flush_user_streams()
    if speaks:
        report = _all_ranks(report, monitor, world)
    if report is not None:
        if json_path is not None:
            _write_json(json_path, report.to_json(), monitor)
        if not monitor.options.quiet:
            from torchleak.views.summary import format_summary

            monitor.say(format_summary(report, monitor.trace))
    elif json_path is not None:
        _write_json(json_path, '{"verdict": "inconclusive", "steps": 0, "findings": [], '
                               '"reason": "analysis failed"}', monitor)
    die_like_python(outcome)
    # Under torchrun rank 0 judges the whole run: a leaking rank exiting early would make
    # the launcher stop rank 0 before it speaks.
    if (args.fail_on_leak and speaks and outcome.code == 0 and report is not None
            and report.verdict == "leak"):
        return EXIT_LEAK
    return outcome.code


def _all_ranks(report: Report | None, monitor: Monitor, world: int) -> Report | None:
    """Under torchrun, rank 0's report of every rank (once their traces are finished)."""
    if report is None or world <= 1 or monitor.folder is None:
        return report
    from torchleak.live.ranks import run_summary

    return run_summary(monitor.folder.parent, world) or report


def _target(args: argparse.Namespace) -> Target:
    rest = list(args.target)
    if rest and rest[0] == "--":
        rest = rest[1:]
    if args.module:
        return Target(None, args.module[0], args.module[1:] + rest)
    if not rest:
        raise UsageError("nothing to run: torchleak run [options] script.py [args ...] "
                         "(or -m module)")
    return Target(Path(rest[0]), None, rest[1:])


def _json_path(value: str | None) -> Path | None:
    """Refuse an unwritable --json path now, not after hours of training."""
    if not value:
        return None
    path = Path(value)
    if path.is_dir():
        raise UsageError(f"--json {path} is a folder: pass a file name")
    existed = path.exists()
    try:
        with path.open("a"):
            pass
    except OSError as err:
        raise OutputNotWritable(f"cannot write --json {path}: {err.strerror or err}") from None
    if not existed:
        os.unlink(path)
    return path


def _write_json(path: Path, text: str, monitor: Monitor) -> None:
    try:
        path.write_text(text)
    except OSError as err:  # checked at start; the folder may have gone since
        monitor.say(f"torchleak: cannot write --json {path}: {err.strerror or err}")


def _flush_user_streams() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError, AttributeError):
            pass
