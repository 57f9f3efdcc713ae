"""``attach --eval``: run a piece of code in the training process, on the training thread.

It runs at a step boundary with the script's globals (the ``__main__`` module's
namespace) and, read-only, the locals of the innermost user frame at that boundary (the
training loop's function). Names are looked up in those locals first, then in the
globals, then in builtins; a name the code assigns becomes a global of the script (so
``lr = 1e-4`` changes the script's ``lr``; the function's own locals are never written).
Like the Python prompt, a final expression's value is shown.

What the code prints on this thread is captured and sent back (``control_streams``:
nothing process-wide is swapped); other threads, and threads the code starts, keep
printing where they did. Whatever the code raises, ``KeyboardInterrupt``, ``SystemExit``
and ``GeneratorExit`` included, comes back as traceback text and never reaches the
training loop.
"""

from __future__ import annotations

import ast
import reprlib
import sys
import traceback
from collections.abc import Iterator, MutableMapping
from pathlib import Path
from types import FrameType, ModuleType
from typing import Any

from torchleak.live.control_protocol import truncate
from torchleak.live.control_streams import MAX_OUTPUT, captured

FILENAME = "<attach>"
_TORCHLEAK_DIR = str(Path(__file__).resolve().parent.parent)

_repr = reprlib.Repr()
_repr.maxlevel = 4
_repr.maxlist = _repr.maxtuple = _repr.maxdict = _repr.maxset = _repr.maxdeque = 100
_repr.maxstring = _repr.maxother = _repr.maxlong = MAX_OUTPUT


def evaluate(code: str, frame: FrameType | None) -> dict[str, Any]:
    """Run ``code``; {ok, stdout, stderr, result, error, frame}. Never raises what the
    code raised."""
    main = sys.modules.get("__main__")
    namespace = main.__dict__ if isinstance(main, ModuleType) else {}
    user = _user_frame(frame)
    scope = _Scope(_locals_of(user), namespace)
    result: str | None = None
    error: str | None = None
    with captured() as (out, err):
        try:
            result = _run(code, namespace, scope)
        except SyntaxError as exc:
            error = "".join(traceback.format_exception_only(type(exc), exc))
        except BaseException as exc:  # noqa: BLE001 - the code's, never the training loop's
            error = _traceback_text(exc)
    scope.release()
    return {"ok": error is None, "stdout": out.text(), "stderr": err.text(),
            "result": result, "error": truncate(error, MAX_OUTPUT) if error else None,
            "frame": _frame_name(user)}


def _run(code: str, namespace: dict[str, Any], scope: _Scope) -> str | None:
    tree = ast.parse(code, FILENAME, "exec")
    last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
    namespace.setdefault("__builtins__", __builtins__)
    if tree.body:
        exec(compile(tree, FILENAME, "exec"), namespace, scope)  # noqa: S102 - the feature
    if last is None:
        return None
    expression = ast.Expression(last.value)
    value = eval(compile(expression, FILENAME, "eval"), namespace, scope)  # noqa: S307
    return None if value is None else truncate(_repr.repr(value), MAX_OUTPUT)


class _Scope(MutableMapping[str, Any]):
    """The locals the code sees: the training frame's (read-only copy), writing through
    to the script's globals."""

    def __init__(self, frame_locals: dict[str, Any], namespace: dict[str, Any]) -> None:
        self._locals = frame_locals
        self._globals = namespace

    def __getitem__(self, key: str) -> Any:
        return self._locals[key]  # KeyError: Python goes on to the globals, then builtins

    def __setitem__(self, key: str, value: Any) -> None:
        self._locals.pop(key, None)
        self._globals[key] = value

    def __delitem__(self, key: str) -> None:
        if key in self._locals:
            del self._locals[key]
        else:
            del self._globals[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._locals)

    def __len__(self) -> int:
        return len(self._locals)

    def release(self) -> None:
        """Drop the copied locals: a deleted local must not live on through us."""
        self._locals = {}


def _user_frame(frame: FrameType | None) -> FrameType | None:
    """The innermost frame of the user's own code at the boundary."""
    if "torch" in sys.modules:
        from torchleak.record.probes.usercode import user_frames

        frames = user_frames(frame)
        return frames[0] if frames else None
    while frame is not None and frame.f_code.co_filename.startswith(_TORCHLEAK_DIR):
        frame = frame.f_back
    return frame


def _locals_of(frame: FrameType | None) -> dict[str, Any]:
    if frame is None or frame.f_code.co_name == "<module>":
        return {}  # a module frame's locals are its globals
    from torchleak.record.probes.access import frame_locals

    return frame_locals(frame)


def _frame_name(frame: FrameType | None) -> str | None:
    if frame is None:
        return None
    code = frame.f_code
    return f"{code.co_name} ({Path(code.co_filename).name}:{frame.f_lineno})"


def _traceback_text(exc: BaseException) -> str:
    """The traceback from the attached code down, without torchleak's frames."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename != FILENAME:
        tb = tb.tb_next
    return "".join(traceback.format_exception(type(exc), exc, tb))
