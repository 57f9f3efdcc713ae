"""``torchleak attach RUN``: reach into a live run.

RUN is a run folder, a run name in the runs folder, or the pid of a process that
``torchleak run`` or ``torchleak.monitor()`` records. Without a verb: an interactive
prompt whose statements run in the training process at the next step boundary. With
one: ``--eval CODE``, ``--walk``, ``--snapshot``, ``--cleanup``, ``--status`` (for
scripts; ``--json`` prints the run's reply as it came). Code piped on stdin runs as one
``--eval``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from torchleak.live.control_protocol import DEFAULT_TIMEOUT, MAX_TIMEOUT

if TYPE_CHECKING:
    from torchleak.commands.attach_client import Client

HELP = "reach into a live run: run code in it, walk its holders, snapshot, clean up"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Reach into a run while it trains. Commands run in the training process at the "
        "next step boundary, on the training thread; a command that finds no boundary "
        "within --timeout is cancelled and says so. Only the run's own user can attach "
        "(docs/attach.md).")
    parser.add_argument("run", help="run folder, run name in the runs folder, or the pid of "
                                    "a process torchleak records")
    verbs = parser.add_mutually_exclusive_group()
    verbs.add_argument("--eval", metavar="CODE",
                       help="run CODE with the script's globals (and the training function's "
                            "locals, read-only); print its output and value")
    verbs.add_argument("--walk", action="store_true",
                       help="walk the holders now: who holds memory, and the live findings")
    verbs.add_argument("--snapshot", action="store_true",
                       help="census + holder walk (+ CUDA allocator snapshot) into the trace")
    verbs.add_argument("--cleanup", action="store_true",
                       help="collect garbage, empty the CUDA cache, trim the heap; say what "
                            "each freed")
    verbs.add_argument("--status", action="store_true", help="the run's step and settings")
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT, metavar="SECONDS",
                        help=f"wait this long for a step boundary (default {DEFAULT_TIMEOUT:g})")
    parser.add_argument("--rank", type=int, default=None,
                        help="which rank, for a run of several ranks (default: the first)")
    parser.add_argument("--json", action="store_true", help="print the run's reply as JSON")
    parser.add_argument("--runs-dir", type=Path, default=None,
                        help="runs folder for run names (default: $TORCHLEAK_RUNS_DIR or "
                             "./torchleak-runs)")


def execute(args: argparse.Namespace) -> int:
    from torchleak.commands.attach_client import Client, NotRecorded, resolve_target
    from torchleak.errors import AttachUnavailable, UsageError

    if not 0 < args.timeout <= MAX_TIMEOUT:
        raise UsageError(f"--timeout must be in (0, {MAX_TIMEOUT:g}] seconds, got {args.timeout}")
    try:
        target = resolve_target(args.run, args.runs_dir, args.rank)
    except NotRecorded as missing:
        if args.eval is None:
            raise AttachUnavailable(f"process {missing.pid} is not recorded by torchleak: "
                                    "start it with `torchleak run` (or torchleak.monitor()) "
                                    "to walk, snapshot or clean it up") from None
        return _remote(missing.pid, args)
    with Client(target) as client:
        return _one_command(client, args)


def _one_command(client: Client, args: argparse.Namespace) -> int:
    from torchleak.commands import attach_output as out
    from torchleak.commands.attach_repl import repl

    verb = next((v for v in ("walk", "snapshot", "cleanup", "status") if getattr(args, v)), None)
    code = args.eval
    if verb is None and code is None:
        if sys.stdin.isatty():
            return repl(client, args.timeout)
        code = sys.stdin.read()
    reply = client.request(verb or "eval", args.timeout,
                           **({"code": code} if code is not None else {}))
    if args.json:
        print(json.dumps(reply, indent=2))
        return 0 if reply.get("ok") else 1
    if code is not None:
        return out.show_eval(reply)
    text = {"walk": lambda: out.walk_text(reply, client.target),
            "snapshot": lambda: out.snapshot_text(reply, client.target),
            "cleanup": lambda: out.cleanup_text(reply),
            "status": lambda: out.status_text(out.check(reply))}[str(verb)]()
    print(text)
    return 0


def _remote(pid: int, args: argparse.Namespace) -> int:
    from torchleak.commands.attach_output import show_eval
    from torchleak.commands.attach_remote import remote_eval

    reply = remote_eval(pid, args.eval, args.timeout)
    if args.json:
        print(json.dumps(reply, indent=2))
        return 0 if reply.get("ok") else 1
    return show_eval(reply)
