"""Where an ``attach --eval``'s output goes: to the client, for the eval's own thread only.

``sys.stdout`` and ``sys.stderr`` are never swapped for an eval and back. Swapping them
while another thread prints crashes CPython (``print`` holds a borrowed reference to the
stream it looked up; if the swap frees that stream, the other thread writes into freed
memory). Instead, the first eval puts one ``RoutedStream`` in front of each stream and
leaves it there for the rest of the process (it is never freed, nor is what it wraps).
It sends a write to an eval's capture only when it comes from the thread running that
eval, while the eval runs; every other write, including those of threads the eval
started, goes to the stream it wraps, as before.
"""

from __future__ import annotations

import io
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO, Any

MAX_OUTPUT = 64 * 1024  # characters of stdout or stderr sent back

_ROUTES: dict[tuple[int, str], Capture] = {}  # (thread ident, stream name) -> capture
_INSTALLED: list[RoutedStream] = []  # every proxy ever installed: never freed
_LOCK = threading.Lock()


class Capture(io.StringIO):
    """Keeps the first ``MAX_OUTPUT`` characters written and counts the rest."""

    def __init__(self) -> None:
        super().__init__()
        self.dropped = 0

    def write(self, text: str) -> int:
        room = MAX_OUTPUT - self.tell()
        if room < len(text):
            self.dropped += len(text) - max(0, room)
            text = text[:max(0, room)]
        super().write(text)
        return len(text)

    def text(self) -> str:
        value = self.getvalue()
        return value + (f"... [{self.dropped:,} more characters]" if self.dropped else "")


class RoutedStream:
    """A stream in front of the program's own: the eval thread's writes to its capture."""

    def __init__(self, name: str, original: IO[str]) -> None:
        self._name = name
        self._original = original

    def write(self, text: str) -> int:
        capture = _ROUTES.get((threading.get_ident(), self._name))
        if capture is not None:
            return capture.write(text)
        return self._original.write(text)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        if (threading.get_ident(), self._name) not in _ROUTES:
            self._original.flush()

    def __getattr__(self, name: str) -> Any:  # encoding, fileno, isatty, buffer, ...
        return getattr(self._original, name)


@contextmanager
def captured() -> Iterator[tuple[Capture, Capture]]:
    """(stdout, stderr) captures of this thread's writes while the block runs."""
    ident = threading.get_ident()
    out, err = Capture(), Capture()
    _route("stdout")
    _route("stderr")
    _ROUTES[(ident, "stdout")], _ROUTES[(ident, "stderr")] = out, err
    try:
        yield out, err
    finally:
        _ROUTES.pop((ident, "stdout"), None)
        _ROUTES.pop((ident, "stderr"), None)


def _route(name: str) -> None:
    """Put a ``RoutedStream`` in front of ``sys.<name>`` unless one is there already.
    A missing stream (None: pythonw, closed on purpose) is left as it is; what the eval
    prints there goes nowhere, as the program's own prints do."""
    with _LOCK:
        current = getattr(sys, name)
        if current is None or isinstance(current, RoutedStream):
            return
        proxy = RoutedStream(name, current)
        _INSTALLED.append(proxy)
        setattr(sys, name, proxy)
