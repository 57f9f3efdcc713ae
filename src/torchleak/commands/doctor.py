"""``torchleak doctor [script.py]``: check this machine (and a training script) before a
run; print what to change, each with why.

Exit codes: 0 when every check is ok (warnings too, unless ``--strict``), 1 when a check
fails or, with ``--strict``, warns. A missing script is 66, an unreadable one 65.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

HELP = "check the machine and a training script before a run: what to change, and why"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("script", nargs="?", type=Path, default=None, metavar="SCRIPT",
                        help="a training script to check against this machine")
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    parser.add_argument("--strict", action="store_true",
                        help="exit 1 on warnings too (for CI)")


def execute(args: argparse.Namespace) -> int:
    from torchleak.check import check_source
    from torchleak.system.doctor import run_doctor
    from torchleak.system.doctor_render import render_json, render_rich, render_text

    report = run_doctor(args.script, static_check=check_source)
    if args.json:
        sys.stdout.write(render_json(report, args.strict))
    elif sys.stdout.isatty():
        render_rich(report, sys.stdout, args.strict)
    else:
        sys.stdout.write(render_text(report, args.strict))
    sys.stdout.flush()
    return report.exit_code(args.strict)
