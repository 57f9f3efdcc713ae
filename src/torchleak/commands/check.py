"""``torchleak check [PATHS...]``: the static leak checker's command line (ruff-like).

Exit codes: 0 clean, 1 findings (or, with ``--diff``, fixes to apply), 2 usage or
internal error. Never imports torch.
"""

from __future__ import annotations

import argparse
import os
import sys

HELP = "find leak patterns in source code without running it"


def configure(parser: argparse.ArgumentParser) -> None:
    from torchleak.check.output import FORMAT_ALIASES, FORMATS

    parser.add_argument("paths", nargs="*", default=None, metavar="PATH",
                        help="files or folders to check (default: .); '-' reads stdin")
    parser.add_argument("--output-format", "--format", dest="output_format",
                        choices=FORMATS + tuple(FORMAT_ALIASES), default=None,
                        help="full (code frames, the default), concise (one line each), "
                             "json, sarif, github, gitlab or junit")
    parser.add_argument("--select", action="append", metavar="CODES",
                        help="only these codes or prefixes, comma-separated (TL101,TL2,ALL)")
    parser.add_argument("--extend-select", action="append", metavar="CODES",
                        help="add codes to the selection, e.g. TL4 for the noisy rules")
    parser.add_argument("--ignore", action="append", metavar="CODES",
                        help="skip these codes or prefixes")
    parser.add_argument("--exclude", action="append", metavar="GLOB", default=[],
                        help="extra file/folder globs to skip when walking folders")
    parser.add_argument("--fix", action="store_true", help="apply the safe fixes in place")
    parser.add_argument("--unsafe-fixes", action="store_true",
                        help="also apply (with --fix) or show (with --diff) fixes that may "
                             "change behaviour")
    parser.add_argument("--diff", action="store_true",
                        help="print the fixes as a unified diff; change nothing")
    parser.add_argument("--statistics", action="store_true",
                        help="count findings per rule instead of listing them")
    parser.add_argument("--explain", metavar="CODE",
                        help="print the documentation of a rule (code or name) and exit")
    parser.add_argument("--config", metavar="PYPROJECT",
                        help="read [tool.torchleak] from this file for every path")
    parser.add_argument("--isolated", action="store_true", help="ignore pyproject.toml")
    parser.add_argument("--exit-zero", action="store_true",
                        help="exit 0 even when there are findings")
    parser.add_argument("--jobs", type=int, default=None, metavar="N",
                        help="worker processes (default: CPU count, max 8)")
    parser.add_argument("--stdin-filename", default="-", metavar="NAME",
                        help="the name to report for source read from stdin")
    parser.add_argument("--list-rules", action="store_true", help="print the rules and exit")
    parser.add_argument("-q", "--quiet", action="store_true", help="no summary line")


def execute(args: argparse.Namespace) -> int:
    try:
        return _run(args)
    except BrokenPipeError:
        return 0
    except KeyboardInterrupt:
        return 130
    except Exception as err:  # noqa: BLE001 - exit 2 with one line, never a traceback
        from torchleak.errors import TorchleakError

        kind = "error" if isinstance(err, TorchleakError) else "internal error"
        print(f"torchleak check: {kind}: {err}", file=sys.stderr)
        if os.environ.get("TORCHLEAK_DEBUG", "") not in ("", "0"):
            raise
        return 2


def _run(args: argparse.Namespace) -> int:
    from torchleak.check.cli_run import Options, run

    if args.list_rules:
        return _list_rules()
    if args.explain:
        return _explain(args.explain)
    if args.fix and args.diff:
        raise _usage("--fix and --diff cannot be combined: --diff only shows the fixes")
    if args.jobs is not None and args.jobs < 1:
        raise _usage("--jobs must be 1 or more")
    options = Options(
        paths=args.paths or ["."], output_format=args.output_format, select=args.select,
        extend_select=args.extend_select, ignore=args.ignore, exclude=args.exclude,
        fix=args.fix, unsafe_fixes=args.unsafe_fixes, diff=args.diff,
        statistics=args.statistics, config=args.config, isolated=args.isolated,
        exit_zero=args.exit_zero, jobs=args.jobs, stdin_filename=args.stdin_filename,
        quiet=args.quiet, color=_color(),
    )
    return run(options)


def _color() -> bool:
    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR"):
        return True
    return sys.stdout.isatty() and os.environ.get("TERM") != "dumb"


def _usage(message: str) -> Exception:
    from torchleak.errors import UsageError

    return UsageError(message)


def _explain(code: str) -> int:
    from torchleak.check.ruledocs import explain

    text = explain(code)
    if text is None:
        raise _usage(f"unknown rule {code!r}; `torchleak check --list-rules` lists them")
    print(text)
    return 0


def _list_rules() -> int:
    from torchleak.check.rules import ALL_RULES, META_CODES

    for code, text in META_CODES.items():
        print(f"{code}  (always on)  {text}")
    for rule in ALL_RULES:
        state = "on " if rule.default_on else "off"
        print(f"{rule.code}  {state} {rule.name:32} {rule.summary}")
    return 0
