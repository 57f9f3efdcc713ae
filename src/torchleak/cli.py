# PYTHON_ARGCOMPLETE_OK  (shell completion: `torchleak completion bash`)
"""The ``torchleak`` command: a thin dispatcher, one module per subcommand.

Each ``torchleak.commands.<name>`` module has ``HELP``, ``configure(parser)`` and
``execute(args) -> int``. Modules are imported only when their subcommand runs, so
``torchleak check`` never pays for importing torch.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence
from typing import NoReturn

from torchleak.errors import EXIT_SOFTWARE, EXIT_USAGE, TorchleakError

COMMANDS: dict[str, str] = {
    "run": "record a training script and say whether it leaks",
    "check": "find leak patterns in source code without running it",
    "report": "render a recorded run as text, HTML or JSON, or export it to TensorBoard",
    "query": "run read-only SQL against a run's trace",
    "top": "watch a running trace live",
    "ls": "list recorded runs",
    "diff": "compare two runs: did the fix work?",
    "attach": "reach into a live run: run code in it, walk its holders, snapshot, clean up",
    "doctor": "check the machine and a training script before a run",
    "completion": "print the shell code that completes torchleak's commands (bash, zsh, fish)",
}


class _Parser(argparse.ArgumentParser):
    """argparse with the documented exit code for a bad command line (64, not 2) and one
    line that says what to type instead (not the usage block and the error)."""

    command: str | None = None  # the subcommand typed: unknown options are its to list

    def error(self, message: str) -> NoReturn:
        if self.prog != "torchleak":
            hint = f"`{self.prog} --help` lists its options"
        elif self.command is not None:
            hint = f"`torchleak {self.command} --help` lists its options"
        else:
            hint = "`torchleak --help` lists the commands"
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}; {hint}\n")


class _Version(argparse.Action):
    """``--version``: the package's own version (the one its metadata is built from)."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: object, option_string: str | None = None) -> None:
        from torchleak.version import __version__

        parser.exit(0, f"torchleak {__version__}\n")


def _build_parser(argv: Sequence[str]) -> argparse.ArgumentParser:
    parser = _Parser(
        prog="torchleak",
        description="Find, explain and stop memory leaks in PyTorch training.",
    )
    parser.add_argument("--version", action=_Version, nargs=0,
                        help="show the installed version and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    wanted = next((a for a in argv if not a.startswith("-")), None)
    parser.command = wanted if wanted in COMMANDS else None
    for name, summary in COMMANDS.items():
        cmd_parser = sub.add_parser(name, help=summary, description=summary)
        # Only the chosen subcommand's module is imported (keeps `check` free of torch).
        if name == wanted:
            module = importlib.import_module(f"torchleak.commands.{name}")
            module.configure(cmd_parser)
            cmd_parser.set_defaults(_execute=module.execute)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    from torchleak.system.bytecode import keep_own_bytecode

    keep_own_bytecode()
    args_list = list(sys.argv[1:] if argv is None else argv)
    completing = "_ARGCOMPLETE" in os.environ
    parser = _build_parser(_completion_words() if completing else args_list)
    if completing:
        import argcomplete

        argcomplete.autocomplete(parser)  # prints the completions and exits
    args = parser.parse_args(args_list)
    execute = getattr(args, "_execute", None)
    if execute is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    try:
        return int(execute(args))
    except TorchleakError as err:
        # One line, whatever it quotes (SQLite's messages quote SQL with its newlines).
        print(f"torchleak: error: {' '.join(str(err).split())}", file=sys.stderr)
        return err.exit_code
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0
    except Exception as err:  # noqa: BLE001 - last resort: one line, not a traceback dump
        print(
            f"torchleak: internal error: {type(err).__name__}: {err} "
            "(please report it; set TORCHLEAK_DEBUG=1 for the traceback)",
            file=sys.stderr,
        )
        if _debug():
            raise
        return EXIT_SOFTWARE


def _completion_words() -> list[str]:
    """The words typed so far, when the shell asks for completions (the subcommand's
    options are configured only for the subcommand being typed)."""
    import shlex

    try:
        return shlex.split(os.environ.get("COMP_LINE", ""))[1:]
    except ValueError:
        return []


def _debug() -> bool:
    return os.environ.get("TORCHLEAK_DEBUG", "") not in ("", "0")
