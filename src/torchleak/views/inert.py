"""Text from a trace (or a run's reply) made inert before a terminal shows it.

A holder's name, a culprit, a source file, an event message or an eval's output can hold
anything the program put there, terminal escape sequences included (``\\x1b]52;...``
writes the clipboard, ``\\x1b[2J`` clears the screen, ``\\r`` overwrites a line). Text
views show such characters escaped, as Python's ``repr`` would. Each text view's entry
point is decorated with ``inert_input``, which escapes every string it is given (the whole
Report, a run's summary, a diff) before the view reads any field, so no field can be
forgotten; table cells (``tabular.cell``, used by ``query``) go through ``shown``.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from collections.abc import Callable
from pathlib import PurePath
from typing import Any, TypeVar

T = TypeVar("T")

# C0 controls but tab and newline, DEL, C1 controls, the bidirectional overrides that
# reorder what is shown, and lone surrogates (which no terminal encoding can write).
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069"
                     "\ud800-\udfff]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def shown(text: str) -> str:
    """``text`` with every character that could steer a terminal written as an escape."""
    return _UNSAFE.sub(_escape, text) if _UNSAFE.search(text) else text


def inert(value: T) -> T:
    """A copy of ``value`` (a Report, a dataclass, dicts, lists, tuples of them) whose
    strings are all ``shown``; the object itself when there is nothing to escape."""
    return _inert(value, 0)  # type: ignore[no-any-return]


def _inert(value: Any, depth: int) -> Any:
    if isinstance(value, str):
        return shown(value)
    if isinstance(value, PurePath):  # a run folder named after a hostile script
        return type(value)(shown(str(value)))
    if depth > 50 or value is None or isinstance(value, (int, float, bytes)):
        return value
    if isinstance(value, dict):
        return {_inert(k, depth + 1): _inert(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        items = [_inert(v, depth + 1) for v in value]
        return items if isinstance(value, list) else _same_tuple(value, items)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        changes = {f.name: _inert(getattr(value, f.name), depth + 1)
                   for f in dataclasses.fields(value) if f.init}
        return dataclasses.replace(value, **changes)
    return value


def _same_tuple(value: tuple[Any, ...], items: list[Any]) -> tuple[Any, ...]:
    if hasattr(value, "_fields"):  # a named tuple
        return type(value)(*items)
    return tuple(items)


F = TypeVar("F", bound=Callable[..., Any])


def inert_input(func: F) -> F:
    """A text view whose every argument is made ``inert`` first: its entry point."""

    @functools.wraps(func)
    def view(*args: Any, **kwargs: Any) -> Any:
        return func(*[inert(a) for a in args], **{k: inert(v) for k, v in kwargs.items()})

    return view  # type: ignore[return-value]
