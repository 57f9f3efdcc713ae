"""The control protocol ``torchleak attach`` speaks with a running Monitor.

One JSON object per line over a Unix socket, ``control.sock`` in the run folder (the rank
folder under a multi-process launch). Every message carries ``"v": PROTOCOL``.

server -> client, once, on connect::

    {"v": 1, "kind": "hello", "pid": 123, "run": "train-...", "rank": null, "step": 41,
     "mode": "full", "ops": ["eval", "walk", ...], "timeout": 10.0}
    {"v": 1, "kind": "refused", "error": "..."}            (then the server hangs up)

client -> server, one request at a time (``cancel`` may follow while one waits)::

    {"v": 1, "id": 7, "op": "eval", "code": "len(history)", "timeout": 10.0}
    {"v": 1, "id": 7, "op": "cancel"}

server -> client, one reply per request::

    {"v": 1, "id": 7, "ok": true, "op": "eval", "state": "done", "step": 42, ...}
    {"v": 1, "id": 7, "ok": false, "state": "timeout" | "cancelled" | "running" |
     "refused" | "error" | "ended", "error": "one line saying what happened"}

This module is shared by the server (``torchleak.live.control``) and the client
(``torchleak.commands.attach_client``); it imports nothing heavy.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

PROTOCOL = 1
SOCKET_NAME = "control.sock"
MAX_MESSAGE = 1 << 20  # bytes in one JSON line: a bigger request is refused
DEFAULT_TIMEOUT = 10.0  # seconds a command waits for a step boundary
MAX_TIMEOUT = 3600.0
CONTROL_ENV = "TORCHLEAK_CONTROL"
OPS = ("eval", "walk", "snapshot", "cleanup", "status")
CHANGING_OPS = ("eval", "cleanup")  # change the process: off unless control is 'full'
# Unix socket paths are limited to 108 bytes (sun_path); longer ones go through a
# directory descriptor (/proc/self/fd/N/control.sock), which Linux resolves directly.
_SUN_PATH = 100

_ON = ("", "1", "on", "yes", "true", "full")
_OBSERVE = ("0", "no", "false", "observe", "noeval", "no-eval")
_OFF = ("off", "none", "never")


class ProtocolError(Exception):
    """A message that is not a JSON object of this protocol."""


def control_mode(option: bool | None) -> str:
    """'full' (every command), 'observe' (walk, snapshot, status: nothing that changes the
    process) or 'off' (no socket). The option wins; otherwise ``$TORCHLEAK_CONTROL``."""
    if option is True:
        return "full"
    if option is False:
        return "observe"
    value = os.environ.get(CONTROL_ENV, "").strip().lower()
    if value in _ON:
        return "full"
    if value in _OFF:
        return "off"
    return "observe"  # '0' and anything unexpected: the careful choice


def encode(message: dict[str, Any]) -> bytes:
    return (json.dumps({"v": PROTOCOL, **message}, default=str, separators=(",", ":"))
            + "\n").encode("utf-8", "backslashreplace")


def decode(line: bytes) -> dict[str, Any]:
    try:
        message = json.loads(line)
    except (ValueError, RecursionError) as err:
        raise ProtocolError(f"not JSON: {err}") from None
    if not isinstance(message, dict):
        raise ProtocolError("not a JSON object")
    version = message.get("v")
    if version != PROTOCOL:
        raise ProtocolError(f"protocol version {version!r} is not spoken here (this side "
                            f"speaks {PROTOCOL}): use the same torchleak version on both sides")
    return message


class LineReader:
    """Reads newline-ended messages from a socket, refusing lines over ``MAX_MESSAGE``."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self._buffer = b""

    def readline(self, timeout: float | None = None) -> bytes | None:
        """One line (without its newline); None at end of stream; TimeoutError when
        ``timeout`` seconds pass first."""
        while b"\n" not in self._buffer:
            if timeout is not None and not _readable(self._sock, timeout):
                raise TimeoutError
            chunk = self._sock.recv(65536)
            if not chunk:
                return None
            self._buffer += chunk
            if len(self._buffer) > MAX_MESSAGE and b"\n" not in self._buffer:
                raise ProtocolError(f"message longer than {MAX_MESSAGE:,} bytes")
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line

    def pending(self) -> bool:
        """Whether a line (or the end of the stream) can be read without waiting."""
        return b"\n" in self._buffer or _readable(self._sock, 0)


def _readable(sock: socket.socket, timeout: float) -> bool:
    return bool(wait_readable([sock.fileno()], timeout))


def wait_readable(fds: list[int], timeout: float | None) -> list[int]:
    """The descriptors of ``fds`` that can be read (or are at their end) within ``timeout``
    seconds (None: however long it takes). ``poll``: a busy program may hold more than
    the 1,024 descriptors ``select`` can watch."""
    poller = select.poll()
    for fd in fds:
        poller.register(fd, select.POLLIN)
    wait_ms = None if timeout is None else max(0, int(timeout * 1000))
    return [fd for fd, _event in poller.poll(wait_ms)]


@contextlib.contextmanager
def reachable(path: Path) -> Iterator[str]:
    """A name for ``path`` that fits a Unix socket address (bind or connect)."""
    text = os.fsencode(path)
    if len(text) < _SUN_PATH:
        yield str(path)
        return
    fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        yield f"/proc/self/fd/{fd}/{path.name}"
    finally:
        os.close(fd)


def truncate(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, saying how much was cut."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... [{len(text) - limit:,} more characters]"
