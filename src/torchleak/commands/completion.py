"""``torchleak completion bash|zsh|fish``: the shell code that completes torchleak's
commands and options (argcomplete). Put ``eval "$(torchleak completion bash)"`` in
``~/.bashrc`` (zsh: ``~/.zshrc``; fish: ``torchleak completion fish | source``)."""

from __future__ import annotations

import argparse
import sys

HELP = "print the shell code that completes torchleak's commands (bash, zsh, fish)"
SHELLS = ("bash", "zsh", "fish")


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("shell", choices=SHELLS, help="your shell")


def execute(args: argparse.Namespace) -> int:
    import argcomplete

    sys.stdout.write(argcomplete.shellcode(["torchleak"], shell=args.shell))
    return 0
