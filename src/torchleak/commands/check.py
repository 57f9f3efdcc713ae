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
    from torchleak.check.output import FORMATS

    parser.add_argument("paths", nargs="*", default=None, metavar="PATH",
                        help="files or folders to check (default: .); '-' reads stdin")
    parser.add_argument("--format", choices=FORMATS, default="text",
                        help="output format (default: text)")
    parser.add_argument("--select", action="append", metavar="CODES",
                        help="only these codes or prefixes, comma-separated (TL101,TL2,ALL)")
    parser.add_argument("--extend-select", action="append", metavar="CODES",
                        help="add codes to the selection, e.g. TL4 for the noisy rules")
    parser.add_argument("--ignore", action="append", metavar="CODES",
                        help="skip these codes or prefixes")
    parser.add_argument("--exclude", action="append", metavar="GLOB", default=[],
                        help="extra file/folder globs to skip when walking folders")
    parser.add_argument("--fix", action="store_true", help="apply the safe fixes in place")
    parser.add_argument("--diff", action="store_true",
                        help="print the fixes as a unified diff; change nothing")
    parser.add_argument("--config", metavar="PYPROJECT",
                        help="read [tool.torchleak] from this file instead of searching")
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
    from torchleak.check.config import Config, find_pyproject, load_config
    from torchleak.check.output import render
    from torchleak.check.runner import check_many, diff_of, write_fix
    from torchleak.check.selection import Selection, parse_codes

    if args.list_rules:
        return _list_rules()
    if args.fix and args.diff:
        raise _usage("--fix and --diff cannot be combined: --diff only shows the fixes")
    paths = args.paths or ["."]
    config = Config()
    if not args.isolated:
        from pathlib import Path

        config = load_config(Path(args.config) if args.config else find_pyproject(paths))
    cli_select = _codes(args.select, "--select", parse_codes)
    selection = Selection.build(
        cli_select or config.select or None,
        config.ignore + _codes(args.ignore, "--ignore", parse_codes),
        ([] if cli_select else config.extend_select)
        + _codes(args.extend_select, "--extend-select", parse_codes),
    )
    if paths == ["-"]:
        return _run_stdin(args, selection)
    want_fixes = args.fix or args.diff
    results = check_many(paths, selection, config.exclude + args.exclude, want_fixes,
                         args.jobs)
    diagnostics, fixed, errors = [], 0, []
    for result in results:
        if args.diff and result.fixed_source is not None:
            sys.stdout.write(diff_of(result))
        if args.fix and result.fixed_source is not None:
            error = write_fix(result)
            if error is None:
                fixed += len(result.fixed)
                applied = set(result.fixed)
                result.diagnostics = [d for d in result.diagnostics if d not in applied]
            else:
                errors.append(error)
        diagnostics.extend(result.diagnostics)
    for error in errors:
        print(f"torchleak check: {error}", file=sys.stderr)
    if args.diff:
        changes = sum(len(r.fixed) for r in results)
        print(f"Would fix {changes} problem{'s' if changes != 1 else ''}.", file=sys.stderr)
        return 0 if args.exit_zero or not changes else 1
    _print(render(diagnostics, args.format, fixed), args)
    return 0 if args.exit_zero or not diagnostics else (2 if errors else 1)


def _run_stdin(args: argparse.Namespace, selection: object) -> int:
    from torchleak.check.engine import check_text, decode
    from torchleak.check.notebook import check_notebook
    from torchleak.check.output import render

    name = args.stdin_filename
    text, error = decode(sys.stdin.buffer.read(), name)
    if text is None:
        diags = [error] if error else []
    elif name.endswith(".ipynb"):
        diags = check_notebook(text, name, selection)  # type: ignore[arg-type]
    else:
        diags = check_text(text, name, selection)  # type: ignore[arg-type]
    _print(render(diags, args.format), args)
    return 0 if args.exit_zero or not diags else 1


def _print(text: str, args: argparse.Namespace) -> None:
    if args.format == "text" and args.quiet:
        text = "\n".join(line for line in text.splitlines() if ": TL" in line)
    if text:
        print(text)


def _codes(values: list[str] | None, flag: str, parse) -> list[str]:  # noqa: ANN001
    return parse(values, flag) if values else []


def _usage(message: str) -> Exception:
    from torchleak.errors import UsageError

    return UsageError(message)


def _list_rules() -> int:
    from torchleak.check.rules import ALL_RULES, META_CODES

    for code, text in META_CODES.items():
        print(f"{code}  (always on)  {text}")
    for rule in ALL_RULES:
        state = "on " if rule.default_on else "off"
        print(f"{rule.code}  {state} {rule.name:32} {rule.summary}")
    return 0
