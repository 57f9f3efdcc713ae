"""What the holder walk records, and how it finds a holder again without keeping it."""

from __future__ import annotations

import collections
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from types import FrameType, FunctionType, MethodType
from typing import Any

import torch

from torchleak.record.probes import access
from torchleak.record.probes.sizes import container_footprint, tensor_footprint

# A route finds an object again from a root without keeping a reference to it:
# (("local", func, var) | ("global", module, var) | ("thread", ident, func, var), then
#  ("attr", name) | ("key", k) | ("index", i) | ("child", name) ...)
Route = tuple[tuple[Any, ...], ...]


@dataclass
class HolderSample:
    holder: str
    kind: str
    type_name: str
    length: int
    bytes: int = 0
    tensors: int = 0
    tensor_bytes: int = 0
    grad_fn_tensors: int = 0
    graph_nodes: int | None = None
    detail: dict[str, Any] = field(default_factory=dict)
    route: Route | None = None  # how to find it again; not written to the trace


def _hook_name(hook: Any) -> str:
    if type(hook) in (FunctionType, MethodType):
        return str(hook.__qualname__)
    return access.type_name(hook)


def hooks_sample(path: str, hooks: list[Any], owner: str) -> HolderSample:
    """A hook table or registry: how many entries, and what the newest ones capture."""
    # The newest entries name the pattern; a registry of thousands costs no more to name.
    names = collections.Counter(_hook_name(h) for h in hooks[-64:])
    captured = 0.0
    for hook in hooks[-4:]:
        fn = hook.__func__ if type(hook) is MethodType else hook
        cells = fn.__closure__ if type(fn) is FunctionType else None
        for cell in cells or ():
            try:
                value = cell.cell_contents
            except ValueError:
                continue
            if access.is_a(value, torch.Tensor):
                captured += tensor_footprint(value).bytes
            elif access.container_base(value) is not None:
                captured += container_footprint(value).bytes
    per_hook = captured / min(4, len(hooks)) if hooks else 0.0
    top = names.most_common(1)[0][0] if names else "?"
    return HolderSample(path, "hooks", owner, len(hooks), int(per_hook * len(hooks)),
                        detail={"hook": top, "hooks": dict(names.most_common(3)),
                                "source": source_of(hooks[-1]) if hooks else None})


def source_of(fn: Any) -> str | None:
    if type(fn) is MethodType:
        fn = fn.__func__
    if type(fn) is not FunctionType:
        return None
    code = fn.__code__
    return f"{code.co_filename}:{code.co_firstlineno}"


class Resolver:
    """Follows routes from the roots of one boundary (locals are copied once per frame)."""

    def __init__(self, frames: list[FrameType], threads: Callable[[], dict[int, FrameType]]
                 ) -> None:
        self._frames = frames
        self._threads = threads
        self._locals: dict[int, dict[str, Any]] = {}

    def _frame_locals(self, frame: FrameType) -> dict[str, Any]:
        key = id(frame)
        if key not in self._locals:
            self._locals[key] = access.frame_locals(frame)
        return self._locals[key]

    def _thread_frame(self, ident: int, func: str) -> FrameType:
        frame: FrameType | None = self._threads()[ident]
        while frame is not None and frame.f_code.co_name != func:
            frame = frame.f_back
        if frame is None:
            raise KeyError(func)
        return frame

    def resolve(self, route: Route) -> Any:
        """Follow a route from its root; raises KeyError & co when it no longer leads
        anywhere."""
        kind, *where = route[0]
        if kind == "local":
            func, var = where
            frame = next(f for f in self._frames if f.f_code.co_name == func)
            obj = self._frame_locals(frame)[var]
        elif kind == "thread":
            ident, func, var = where
            obj = self._frame_locals(self._thread_frame(ident, func))[var]
        else:
            module, var = where
            obj = vars(sys.modules[module])[var]
        for step, key in route[1:]:
            obj = _follow(obj, step, key)
        return obj

    def release(self) -> None:
        self._locals.clear()
        self._frames = []


def _follow(obj: Any, step: str, key: Any) -> Any:
    if step == "attr" and key == "__self__":
        return obj.__self__ if type(obj) is MethodType else _missing(key)
    if step == "attr":
        value = access.attribute(obj, key, _MISSING)
        return _missing(key) if value is _MISSING else value
    if step == "child":
        return ((access.instance_dict(obj) or {}).get("_modules") or {})[key]
    if step == "buffer":
        return ((access.instance_dict(obj) or {}).get("_buffers") or {})[key]
    if access.container_base(obj) is dict:
        return dict.__getitem__(obj, key)
    return access.element_at(obj, key)


_MISSING = object()


def _missing(key: Any) -> Any:
    raise KeyError(key)
