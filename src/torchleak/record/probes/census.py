"""The full census: every live tensor and every gc-tracked object, at a step boundary.

This is the expensive probe (~50-150 ms with torch imported), so the scheduler runs it
rarely: at anchor steps and when the budget allows. Tensors are found through
``gc.get_objects()``; storages shared by views are counted once; autograd graphs are
walked from every tensor holding a ``grad_fn`` (nodes counted once across all graphs,
saved tensors counted once by storage).
"""

from __future__ import annotations

import collections
import gc
import time
from dataclasses import dataclass, field
from typing import Any

import torch

_GRAPH_CAP = 200_000
_GRAPH_SECONDS = 0.05  # saved-tensor introspection is slow: bound the walk in time too
_TOP_TYPES = 40


@dataclass
class CensusResult:
    tensors: int = 0
    tensor_bytes: int = 0
    grad_fn_tensors: int = 0
    graph_nodes: int = 0
    graph_bytes: int = 0
    gc_objects: int = 0
    by_device_dtype: dict[tuple[str, str], list[int]] = field(default_factory=dict)
    top_types: list[tuple[str, int]] = field(default_factory=list)


def take_census() -> CensusResult:
    objects = gc.get_objects()
    result = CensusResult(gc_objects=len(objects))
    type_counts: collections.Counter[type] = collections.Counter(map(type, objects))
    tensor_types = {t for t in type_counts if issubclass(t, torch.Tensor)}
    tensors = [o for o in objects if type(o) in tensor_types] if tensor_types else []
    del objects
    storages: dict[int, int] = {}
    roots = []
    for t in tensors:
        _count_tensor(t, result, storages)
        if t.grad_fn is not None:
            result.grad_fn_tensors += 1
            roots.append(t.grad_fn)
    result.tensor_bytes = sum(storages.values())
    result.graph_nodes, result.graph_bytes = _walk_graphs(roots, storages)
    result.top_types = [(f"{t.__module__}.{t.__qualname__}", n)
                        for t, n in type_counts.most_common(_TOP_TYPES)]
    return result


def _count_tensor(t: torch.Tensor, result: CensusResult, storages: dict[int, int]) -> None:
    result.tensors += 1
    try:
        storage = t.untyped_storage()
        key, nbytes = storage.data_ptr(), storage.nbytes()
    except Exception:  # noqa: BLE001 - sparse/meta/fake tensors have no plain storage
        key, nbytes = id(t), 0
    device = t.device
    slot = result.by_device_dtype.setdefault((str(device), str(t.dtype)), [0, 0])
    slot[0] += 1
    if key not in storages:
        storages[key] = nbytes
        slot[1] += nbytes


_SAVED_ATTRS: dict[type, tuple[str, ...]] = {}


def _saved_attrs(node: Any) -> tuple[str, ...]:
    cls = type(node)
    names = _SAVED_ATTRS.get(cls)
    if names is None:
        names = tuple(n for n in dir(cls) if n.startswith("_saved_"))
        _SAVED_ATTRS[cls] = names
    return names


def _walk_graphs(roots: list[Any], storages: dict[int, int]) -> tuple[int, int]:
    """Nodes reachable from all roots, and bytes of saved tensors not already counted."""
    seen: dict[int, Any] = {}
    saved: dict[int, int] = {}
    stack = list(roots)
    deadline = time.perf_counter() + _GRAPH_SECONDS
    while stack and len(seen) < _GRAPH_CAP:
        if len(seen) % 256 == 0 and time.perf_counter() > deadline:
            break
        node = stack.pop()
        if id(node) in seen:
            continue
        seen[id(node)] = node
        for name in _saved_attrs(node):
            _count_saved(node, name, storages, saved)
        for child, _ in getattr(node, "next_functions", ()):
            if child is not None:
                stack.append(child)
    return len(seen), sum(saved.values())


def _count_saved(node: Any, name: str, storages: dict[int, int], saved: dict[int, int]) -> None:
    try:
        value = getattr(node, name)
    except Exception:  # noqa: BLE001 - freed after backward ("graph a second time")
        return
    values = value if isinstance(value, tuple) else (value,)
    for v in values:
        if isinstance(v, torch.Tensor):
            try:
                storage = v.untyped_storage()
                key = storage.data_ptr()
                if key not in storages and key not in saved:
                    saved[key] = storage.nbytes()
            except Exception:  # noqa: BLE001
                continue
