"""The interactive prompt of ``torchleak attach RUN``.

Each statement (several lines when it opens a block, as at the Python prompt) runs in
the training process at the next step boundary. ``:walk``, ``:snapshot``, ``:cleanup``
and ``:status`` run the other commands; Ctrl-C drops the line being typed or cancels
the command that waits; Ctrl-D leaves. The history is kept, 0600, in
``$XDG_STATE_HOME/torchleak/attach_history`` (``~/.local/state`` by default).
"""

from __future__ import annotations

import codeop
import contextlib
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from torchleak.commands.attach_client import Client, ConnectionLost
from torchleak.commands.attach_output import (cleanup_text, show_eval, snapshot_text,
                                              status_text, walk_text)
from torchleak.errors import TorchleakError

PROMPT, MORE = "torchleak>>> ", "torchleak... "
HISTORY_LINES = 1000
HELP = """each statement runs in the training process at the next step boundary, on the
training thread, with the script's globals and the training function's locals (read-only);
names you assign become globals of the script.
  :walk      a holder walk now       :snapshot  census + walk into the trace
  :cleanup   free what can be freed  :status    the run's step and settings
  Ctrl-C     drop the line / cancel  Ctrl-D     leave"""


def repl(client: Client, timeout: float) -> int:
    print(f"attached to {status_text(client.hello)}", file=sys.stderr)
    print("type :help for help, Ctrl-D to leave", file=sys.stderr)
    with _history():
        while True:
            try:
                source = _read_statement()
            except EOFError:
                print(file=sys.stderr)
                return 0
            except KeyboardInterrupt:
                print("\nKeyboardInterrupt", file=sys.stderr)
                continue
            if not source.strip():
                continue
            try:
                _run(client, source.strip(), source, timeout)
            except ConnectionLost as err:
                print(f"torchleak: {err}", file=sys.stderr)
                return err.exit_code
            except TorchleakError as err:
                print(f"torchleak: {err}", file=sys.stderr)


def _run(client: Client, command: str, source: str, timeout: float) -> None:
    shows: dict[str, Callable[[dict[str, Any]], str]] = {
        ":walk": lambda r: walk_text(r, client.target),
        ":snapshot": lambda r: snapshot_text(r, client.target),
        ":cleanup": cleanup_text,
        ":status": status_text,
    }
    if command == ":help":
        print(HELP)
    elif command in shows:
        print(shows[command](client.request(command[1:], timeout)))
    else:
        show_eval(client.request("eval", timeout, code=source))


def _read_statement() -> str:
    lines = [input(PROMPT)]
    while not lines[0].startswith(":"):
        try:
            if codeop.compile_command("\n".join(lines), "<attach>", "single") is not None:
                break
        except (SyntaxError, ValueError, OverflowError):
            break  # the run reports the error with the usual text
        lines.append(input(MORE))
    return "\n".join(lines)


@contextlib.contextmanager
def _history() -> Any:
    try:
        import readline
    except ImportError:  # no readline (some builds): a prompt without history
        yield
        return
    path = Path(os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state") / (
        "torchleak") / "attach_history"
    with contextlib.suppress(OSError):
        readline.read_history_file(path)
    readline.set_history_length(HISTORY_LINES)
    try:
        yield
    finally:
        with contextlib.suppress(OSError):
            path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            old = os.umask(0o177)  # the client's own process: the history holds code
            try:
                readline.write_history_file(path)
            finally:
                os.umask(old)
