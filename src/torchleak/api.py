"""The public API for loops torchleak cannot see by itself.

``torchleak.watch()`` marks step boundaries in loops without a ``torch.optim``
optimizer; ``torchleak.mark()`` records phase marks. Both do nothing (cheaply) when the
script runs without ``torchleak run``, so they can stay in the code.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from types import TracebackType
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])


def _recorder() -> Any:
    session = sys.modules.get("torchleak.record.session")
    return session.active_recorder() if session is not None else None


def mark(name: str, value: object = None) -> None:
    """Record a phase mark: ``"epoch"``, ``"validation_start"``/``"validation_end"``, or any
    name of yours (``"<phase>_start"``/``"<phase>_end"`` open and close a phase)."""
    recorder = _recorder()
    if recorder is not None:
        recorder.mark(name, None if value is None else str(value))


class watch:  # noqa: N801 - used like a function: `with torchleak.watch() as w:`
    """Step boundaries for a loop torchleak cannot see (no torch.optim optimizer).

    Use as a context manager (``with torchleak.watch() as w: ... w.step()``) or as a
    decorator on a function called once per step (each call ends a step). Once ``step()``
    is used, optimizer calls no longer count as steps.
    """

    def __enter__(self) -> watch:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        return None

    def step(self) -> None:
        recorder = _recorder()
        if recorder is not None:
            recorder.manual_step(sys._getframe(1))

    def __call__(self, fn: F) -> F:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            result = fn(*args, **kwargs)
            recorder = _recorder()
            if recorder is not None:
                recorder.manual_step(sys._getframe(1))
            return result

        return wrapper  # type: ignore[return-value]
