"""The in-process API. Every function here accepts any value and never raises into the
program: a wrong argument is converted, or ignored with one warning.

``torchleak.watch()`` marks step boundaries in loops without a ``torch.optim``
optimizer; ``torchleak.mark()`` records phase marks; both cost nothing without an active
monitor, so they can stay in the code. ``torchleak.monitor()`` records a run in this
process; ``on_leak`` and ``on_guard`` register callbacks.
"""

from __future__ import annotations

import functools
import sys
import warnings
from collections.abc import Callable
from types import TracebackType
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])
_warned: set[str] = set()


def _warn_once(key: str, message: str) -> None:
    if key not in _warned:
        _warned.add(key)
        warnings.warn(f"torchleak: {message}", RuntimeWarning, stacklevel=3)


def _recorder() -> Any:
    engine = sys.modules.get("torchleak.live.engine")
    monitor = engine.active_monitor() if engine is not None else None
    return monitor.recorder if monitor is not None else None


def mark(name: object, value: object = None) -> None:
    """Record a phase mark: ``"epoch"``, ``"validation_start"``/``"validation_end"``, or any
    name of yours (``"<phase>_start"``/``"<phase>_end"`` open and close a phase)."""
    try:
        recorder = _recorder()
        if recorder is None:
            return
        text = name if isinstance(name, str) else str(name)
        recorder.mark(text or "mark", None if value is None else str(value)[:1000])
    except Exception as err:  # noqa: BLE001 - never raise into the program
        _warn_once("mark", f"mark({name!r:.40}) was ignored: {type(err).__name__}: {err}")


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
        _manual_step(sys._getframe(1))

    def __call__(self, fn: F) -> F:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            result = fn(*args, **kwargs)
            _manual_step(sys._getframe(1))
            return result

        return wrapper  # type: ignore[return-value]


def _manual_step(frame: Any) -> None:
    recorder = _recorder()
    if recorder is None:
        return
    try:
        recorder.manual_step(frame)
    except Exception as err:  # noqa: BLE001 - BaseExceptions (a guard stop) go through
        _warn_once("step", f"step() failed: {type(err).__name__}: {err}")


def on_leak(fn: F) -> F:
    """Register ``fn(finding)``, called (on torchleak's detector thread) the first time
    each leak is detected while the run goes on. Usable as a decorator."""
    if callable(fn):
        from torchleak.live.callbacks import add_leak_callback

        add_leak_callback(fn)
    else:
        _warn_once("on_leak", f"on_leak() needs a function, got {type(fn).__name__}")
    return fn


def on_guard(fn: F) -> F:
    """Register ``fn(event)``, called on the training thread at a step boundary when the
    guard fires (``--guard checkpoint|stop``): save your checkpoint there. A decorator."""
    if callable(fn):
        from torchleak.live.callbacks import add_guard_callback

        add_guard_callback(fn)
    else:
        _warn_once("on_guard", f"on_guard() needs a function, got {type(fn).__name__}")
    return fn


def cleanup(verbose: bool = True) -> Any:
    """Free what can be freed now (garbage cycles, CUDA's cached blocks, the C heap's
    slack) and return what each step freed (printed too, with ``verbose``). Under an
    active monitor, when nothing is freed, a holder walk says who holds the memory."""
    from torchleak.system.cleanup import cleanup as run_cleanup

    engine = sys.modules.get("torchleak.live.engine")
    active = engine.active_monitor() if engine is not None else None
    if active is None or active.recorder is None:
        return run_cleanup(verbose=verbose)
    from torchleak.live.control_cleanup import cleanup_here

    return cleanup_here(active.recorder, sys._getframe(1), verbose=verbose)


def monitor(**options: Any) -> Any:
    """Record this process: ``with torchleak.monitor(out="runs/x", guard="stop") as m:``
    (or ``m = torchleak.monitor(...).start()`` ... ``m.stop()``); ``m.report`` is the
    Report at the end. Options as ``torchleak run``: out, name, budget (a fraction),
    limit ("12GiB"), guard, guard_share, guard_minutes, quiet, warnings, safe, control
    (False: ``torchleak attach`` may not run code in this process).

    Never raises: a bad option value is warned about once and its default used; while
    another monitor records the process (``torchleak run``, a callback), this one joins it.
    """
    from torchleak.check.crossref import annotate
    from torchleak.live.inprocess import monitor as in_process

    return in_process({"annotate": annotate, **options})
