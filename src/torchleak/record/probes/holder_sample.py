"""What the holder walk records, and how it finds a holder again without keeping it."""

from __future__ import annotations

import collections
import sys
from dataclasses import dataclass, field
from types import FrameType
from typing import Any

import torch

from torchleak.record.probes.sizes import container_footprint, tensor_footprint

_CONTAINERS = (list, tuple, dict, set, frozenset, collections.deque)


# A route finds an object again from a root without keeping a reference to it:
# (("local", func, var) | ("global", module, var), then ("attr", name) | ("key", k) |
#  ("index", i) | ("child", name) ...)
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


def hooks_sample(path: str, hooks: list[Any], owner: str) -> HolderSample:
    names = collections.Counter(getattr(h, "__qualname__", type(h).__name__) for h in hooks)
    captured = 0.0
    for hook in hooks[-4:]:
        for cell in getattr(hook, "__closure__", None) or ():
            try:
                value = cell.cell_contents
            except ValueError:
                continue
            if isinstance(value, torch.Tensor):
                captured += tensor_footprint(value).bytes
            elif isinstance(value, _CONTAINERS):
                captured += container_footprint(value).bytes
    per_hook = captured / min(4, len(hooks))
    top = names.most_common(1)[0][0]
    return HolderSample(path, "hooks", owner, len(hooks), int(per_hook * len(hooks)),
                        detail={"hook": top, "hooks": dict(names.most_common(3)),
                                "source": source_of(hooks[-1])})


def source_of(fn: Any) -> str | None:
    code = getattr(fn, "__code__", None)
    if code is None:
        return None
    return f"{code.co_filename}:{code.co_firstlineno}"


def resolve(route: Route, frames: list[FrameType]) -> Any:
    """Follow a route from its root; raises KeyError & co when it no longer leads anywhere."""
    kind, *where = route[0]
    if kind == "local":
        func, var = where
        frame = next(f for f in frames if f.f_code.co_name == func)
        obj = frame.f_locals[var]
    else:
        module, var = where
        obj = vars(sys.modules[module])[var]
    for step, key in route[1:]:
        if step == "attr" and key == "__self__":
            obj = obj.__self__  # a bound method's object
        elif step == "attr":
            obj = vars(obj)[key]
        elif step == "child":
            obj = obj._modules[key]
        else:  # key / index
            obj = obj[key]
    return obj
