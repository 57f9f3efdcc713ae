"""``torchleak run [options] script.py [args...]`` / ``torchleak run [options] -m module``."""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

from torchleak.errors import EXIT_LEAK, OutputNotWritable, UsageError
from torchleak.record.runner import Target

HELP = "record a training script and say whether it leaks"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.usage = "torchleak run [options] (script.py | -m module) [args ...]"
    parser.add_argument("--out", metavar="DIR", help="run folder (default: "
                        "./torchleak-runs/<script>-<timestamp>/, or under $TORCHLEAK_RUNS_DIR)")
    parser.add_argument("--name", help="a name for this run (default: the script's name)")
    parser.add_argument("--budget", metavar="PCT", type=float, default=1.0,
                        help="overhead budget for expensive probes, in %% of wall time (default 1)")
    parser.add_argument("--json", metavar="FILE", help="write the verdict and findings as JSON")
    parser.add_argument("--fail-on-leak", action="store_true",
                        help=f"exit {EXIT_LEAK} when a leak is found and the script succeeded")
    parser.add_argument("--quiet", "-q", action="store_true", help="print nothing of our own")
    parser.add_argument("-m", dest="module", metavar="MODULE", nargs=argparse.REMAINDER,
                        help="run a module like python -m; everything after it is its own")
    parser.add_argument("target", nargs=argparse.REMAINDER, help="script.py and its arguments")


def execute(args: argparse.Namespace) -> int:
    target = _target(args)
    from torchleak.record.runner import validate

    validate(target)
    if not 0 < args.budget <= 100:
        raise UsageError(f"--budget must be a percentage in (0, 100], got {args.budget}")
    out_dir = _out_dir(args, target)
    from torchleak.record.orchestrate import record_run

    return record_run(target, out_dir, name=args.name or target.stem, budget=args.budget / 100,
                      json_path=Path(args.json) if args.json else None,
                      fail_on_leak=args.fail_on_leak, quiet=args.quiet)


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


def _out_dir(args: argparse.Namespace, target: Target) -> Path:
    if args.out:
        out = Path(args.out)
    else:
        base = Path(os.environ.get("TORCHLEAK_RUNS_DIR", "torchleak-runs"))
        out = base / f"{args.name or target.stem}-{time.strftime('%Y%m%d-%H%M%S')}"
        suffix = 1
        while out.exists() and "RANK" not in os.environ:
            suffix += 1
            out = out.with_name(f"{out.name.split('~')[0]}~{suffix}")
    rank = os.environ.get("RANK")
    if rank is not None and os.environ.get("WORLD_SIZE", "1") != "1":
        out = out / f"rank{rank}"  # torchrun: one trace per rank, side by side
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe = out / ".torchleak-write-test"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as err:
        raise OutputNotWritable(f"cannot write the run folder {out}: {err.strerror or err} "
                                "(pass --out DIR with a writable folder)") from None
    if (out / "trace.sqlite").exists():
        raise OutputNotWritable(f"{out} already holds a trace: pass another --out folder")
    return out

