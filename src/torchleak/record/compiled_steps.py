"""Optimizer steps that run inside ``torch.compile``d code.

The global optimizer step hook is traced, not run, when ``optimizer.step()`` is part of a
compiled function: the compiled code never calls it back. So at trace time the hook puts
one call to a custom operator, ``torchleak::step``, into the compiled code, and that
operator's Python implementation makes the step at run time, once per real step, with
the key ``id(optimizer)`` fixed when the code was traced.

What the compiler sees: an operator with no tensors in or out, marked as having a side
effect so that no dead-code pass removes it. Its only new guards are on torchleak's own
objects (the optimizer is already guarded on by identity where its step is traced), so
it makes no recompile and no graph break. The call lands in the graph of an optimizer
whose ``step()`` is traced whole (the program's own optimizers), so the graphs stay as
many as without it (~5-10 us a step). torch's own optimizers break the graph around their
update: there the call would be compiled as one more graph of its own, so it is never
put in, and their steps inside compiled code are left to the time samples.

The operator is registered once per process and outlives a recording: compiled code
keeps calling it, and it does nothing while no recording listens. Where torch has no
``torch.library.custom_op`` (before 2.4) nothing is put into compiled code.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from types import FrameType
from typing import Any

# (optimizer key, the user's innermost frame) -> None, while a recording listens.
Listener = Callable[[int, FrameType | None], None]
Marker = Callable[[Any], None]

OP_NAME = "torchleak::step"

_listener: Listener | None = None
_marker: Marker | None = None
_is_user_file: Callable[[str], bool] = lambda filename: False
traced = 0  # step calls put into compiled code (counted at trace time)
counted = 0  # step calls made by compiled code at run time


def listen(listener: Listener) -> None:
    """Send compiled steps to ``listener`` from now on."""
    global _listener
    _listener = listener


def unlisten(listener: Listener) -> None:
    """Stop sending them to ``listener`` (a newer recording's listener stays)."""
    global _listener
    if _listener == listener:
        _listener = None


def step_marker() -> Marker:
    """What the optimizer hook calls when it is being traced: the call that puts the
    step operator into the compiled code (a no-op where the operator cannot exist)."""
    global _marker, _is_user_file
    if _marker is None:
        from torchleak.system.userfiles import is_user_file

        _is_user_file = is_user_file
        _marker = _make_marker(_register())
    return _marker


def _make_marker(op: Any) -> Marker:
    exporting = _export_check()

    def mark(optimizer: Any) -> None:
        # Never inside an exported program: it must load where torchleak is not. Never
        # for torch's own optimizers: they break the graph around their update, so the
        # call would be compiled as a graph of its own (their steps are left to the time
        # samples, or to torchleak.watch().step() after the compiled step).
        if op is not None and not exporting() and \
                not type(optimizer).__module__.startswith("torch.optim"):
            op(id(optimizer))

    return mark


def _export_check() -> Callable[[], bool]:
    """True while ``torch.export`` traces, as the compiler sees it. torch 2.11's compiler
    folds ``torch.compiler.is_exporting()`` to True under every ``torch.compile`` (seen on
    a GPU machine: no compiled step was ever counted there); the flag ``torch.export``
    sets, which later torch reads for it, is read directly where it exists."""
    import torch

    compiler = torch.compiler
    if hasattr(compiler, "_is_exporting_flag"):
        return lambda: bool(compiler._is_exporting_flag)
    is_exporting = getattr(compiler, "is_exporting", None)
    return is_exporting if is_exporting is not None else (lambda: False)


def _register() -> Any:
    """The step operator, or None (an older torch, or one that refuses it)."""
    import torch

    try:
        custom_op = torch.library.custom_op
        from torch.fx.node import has_side_effect
    except (AttributeError, ImportError):
        return None
    try:
        step = custom_op(OP_NAME, _run, mutates_args=(), schema="(int key) -> ()")
        step.register_fake(_traced)
        op = torch.ops.torchleak.step.default
        has_side_effect(op)  # an operator with no outputs is dead code otherwise
        return op
    except Exception:  # noqa: BLE001 - the hook then stays as it was: nothing compiled in
        return None


def _run(key: int) -> None:
    """The step, at run time, on the thread that runs the compiled code."""
    global counted
    counted += 1
    listener = _listener
    if listener is None:
        return
    frame = user_frame(sys._getframe(1))
    try:
        listener(key, frame)
    finally:
        del frame


def _traced(key: int) -> None:
    """The operator's shape function: runs only while the compiler traces a call."""
    global traced
    traced += 1


def user_frame(frame: FrameType | None) -> FrameType | None:
    """The innermost frame of the user's code above ``frame`` (compiled code's own
    frames and torch's are skipped), else ``frame`` itself."""
    found = frame
    while found is not None:
        name = found.f_globals.get("__name__")
        # Inductor's generated modules live outside the libraries but are torch's.
        if _is_user_file(found.f_code.co_filename) and not (
                isinstance(name, str) and name.startswith("torch.")):
            return found
        found = found.f_back
    return frame


def unique_graphs() -> int:
    """The graphs dynamo has made in this process so far (never imports dynamo)."""
    utils = sys.modules.get("torch._dynamo.utils")
    counters = getattr(utils, "counters", None)
    try:
        return int(counters["stats"]["unique_graphs"]) if counters else 0
    except Exception:  # noqa: BLE001 - another torch's counters
        return 0
