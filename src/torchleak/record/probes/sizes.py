"""Cheap size estimates for what a container holds (sampled, never a full deep walk).

Every read goes through ``access`` (no user code runs). Tensors are read with torch
function dispatch disabled by the caller (``HolderWalker.walk``).
"""

from __future__ import annotations

import itertools
import sys
from dataclasses import dataclass
from typing import Any

import torch

from torchleak.record.probes import access
from torchleak.record.probes.graph import walk_graph

_SAMPLE = 8
_SPREAD_LIMIT = 4096  # elements a dict, deque or set is iterated over to sample it
_GRAPH_SAMPLES = 2
_GRAPH_NODES_PER_ITEM = 256  # per sampled item: enough for one step's graph
NODE_BYTES = 200  # an autograd node with its edges, measured order of magnitude
_SCALARS = (int, float, bool, complex, str, bytes, type(None))


@dataclass
class Footprint:
    bytes: float = 0.0
    tensors: float = 0.0
    tensor_bytes: float = 0.0
    grad_fn_tensors: float = 0.0
    device: str | None = None  # of the tensors seen, when they share one

    def add(self, other: Footprint, weight: float = 1.0) -> None:
        self.bytes += other.bytes * weight
        self.tensors += other.tensors * weight
        self.tensor_bytes += other.tensor_bytes * weight
        self.grad_fn_tensors += other.grad_fn_tensors * weight
        if other.device is not None:
            self.device = other.device if self.device in (None, other.device) else "mixed"


def storage_bytes(t: torch.Tensor) -> int:
    try:
        return int(t.untyped_storage().nbytes())
    except Exception:  # noqa: BLE001 - sparse, meta, fake and nested tensors
        try:
            return int(t.numel() * t.element_size()) if t.layout == torch.strided else 0
        except Exception:  # noqa: BLE001
            return 0


def data_ptr(t: torch.Tensor) -> int:
    try:
        return int(t.untyped_storage().data_ptr())
    except Exception:  # noqa: BLE001
        return -1


def tensor_footprint(t: torch.Tensor, graphs: bool = True) -> Footprint:
    nbytes = storage_bytes(t)
    device = str(t.device)
    own = float(nbytes + access.sizeof(t))
    if t.grad_fn is None or not graphs:
        has_graph = 0.0 if t.grad_fn is None else 1.0
        return Footprint(own, 1.0, float(nbytes), has_graph, device)
    # Retained size includes what the graph keeps: saved activations (never freed when no
    # backward ran) and ~200 B per node.
    graph = walk_graph([t.grad_fn], _GRAPH_NODES_PER_ITEM)
    saved = sum(b for ptr, b in graph.saved.items() if ptr != data_ptr(t))
    return Footprint(own + saved + graph.nodes * NODE_BYTES, 1.0, float(nbytes), 1.0, device)


def ndarray_bytes(obj: Any) -> int | None:
    """The data a NumPy array owns (0 for a view: its base owns it), None for anything
    else. Read through ndarray's own descriptors, never a subclass's properties."""
    np = sys.modules.get("numpy")  # not imported: no array can exist
    if np is None or not issubclass(type(obj), np.ndarray):
        return None
    try:
        owns = np.ndarray.base.__get__(obj) is None
        return int(np.ndarray.nbytes.__get__(obj)) if owns else 0
    except Exception:  # noqa: BLE001 - an odd subclass
        return 0


def element_footprint(obj: Any, depth: int = 2, graphs: bool = True) -> Footprint:
    """Footprint of one element, looking ``depth`` levels into builtin containers."""
    if type(obj) in _SCALARS:  # most elements: tested first
        return Footprint(float(access.sizeof(obj)))
    if access.is_a(obj, torch.Tensor):
        return tensor_footprint(obj, graphs)
    array_bytes = ndarray_bytes(obj)
    if array_bytes is not None:
        return Footprint(float(access.sizeof(obj) + array_bytes))
    if depth <= 0:  # scalars returned above
        return Footprint(float(access.sizeof(obj)))
    if access.container_base(obj) is None:
        return object_footprint(obj, depth - 1, graphs) if owned_object(obj) else Footprint(
            float(access.sizeof(obj)))
    return container_footprint(obj, depth - 1)


_OBJECT_ATTRIBUTES = 16  # attributes of one sampled object followed for its retained size


def owned_object(obj: Any) -> bool:
    """A plain object of the user's or a library's (a request, a record, a key): what it
    holds in its attributes is retained by whatever holds it. Classes, functions,
    modules, torch's own objects and weak references are not followed."""
    kind = type(obj)
    module = getattr(kind, "__module__", "") or ""
    if module in ("builtins", "weakref", "_weakref") or module.startswith("torch"):
        return False
    if issubclass(kind, (type, torch.nn.Module, torch.optim.Optimizer)) or callable(obj):
        return False
    return access.instance_dict(obj) is not None or bool(getattr(kind, "__slots__", ()))


def object_footprint(obj: Any, depth: int, graphs: bool = True) -> Footprint:
    """An object's retained size: its own, plus the tensors, arrays, buffers and
    containers in its attributes (a request keeping its upload alive)."""
    attrs = access.instance_dict(obj)
    values = list(attrs.values()) if attrs is not None else list(
        access.slot_values(obj).values())
    total = Footprint(float(access.sizeof(obj) + (access.sizeof(attrs) if attrs else 0)))
    for value in values[:_OBJECT_ATTRIBUTES]:
        total.add(element_footprint(value, depth, graphs))
    return total


def sample_items(obj: Any, n: int = _SAMPLE, pairs: bool = False) -> list[Any]:
    """Up to n elements spread over the container, without copying it (a dict's (key,
    value) pairs with ``pairs``)."""
    size = access.length(obj)
    if size == 0:
        return []
    base = access.container_base(obj)
    if base in (list, tuple):
        stride = max(1, size // n)
        return [access.element_at(obj, i) for i in range(0, size, stride)][:n]
    # dicts, deques and sets have no cheap index: a small one is spread over by iterating
    # it (a C loop); a large one gives its first and newest elements, since what a leak
    # adds is at the end and is often not like what came first (an optimizer's state:
    # the model's own parameters first, then the ones added later).
    keyed = pairs and base is dict
    elements = access.dict_pairs(obj) if keyed else access.values(obj)
    try:
        if size <= _SPREAD_LIMIT:
            return list(itertools.islice(elements, 0, None, max(1, size // n)))[:n]
        newest = access.newest_values(obj, keyed)
        first = list(itertools.islice(elements, n if newest is None else n // 2))
        return first + ([] if newest is None else list(itertools.islice(newest, n - len(first))))
    except RuntimeError:  # changed size while read (another thread): no sample this time
        return []


def key_bytes(key: Any) -> int:
    """What a dict's key costs of its own: a string, number or tuple of them made for the
    entry (``f"step_{i}"``, ``(epoch, i)``), or a plain object with what its attributes
    hold (a weak-valued mapping's key that keeps its value alive); tensors and modules
    keying an entry (a parameter keying an optimizer's state) count nothing."""
    if type(key) in _SCALARS:
        return access.sizeof(key)
    if type(key) is tuple and all(type(k) in _SCALARS for k in key):
        return access.sizeof(key) + sum(access.sizeof(k) for k in key)
    if owned_object(key):  # a key object made for its entry keeps what it holds alive
        return int(object_footprint(key, 1).bytes)
    return 0


def container_footprint(obj: Any, depth: int = 2) -> Footprint:
    size = access.length(obj)
    total = Footprint(float(access.sizeof(obj)))
    keyed = access.container_base(obj) is dict
    sample = sample_items(obj, pairs=keyed)
    if not sample:
        return total
    per_item = Footprint()
    extras: list[float] = []  # what walked graphs retain beyond their tensor
    unwalked = 0
    for i, entry in enumerate(sample):
        key, item = entry if keyed else (None, entry)
        # Walking an item's autograd graph is the dear part: the last two sampled items
        # (the newest) stand for the others that carry a graph.
        walk = i >= len(sample) - _GRAPH_SAMPLES
        fp = element_footprint(item, depth, walk)
        if keyed:
            fp.bytes += key_bytes(key)
        if access.is_a(item, torch.Tensor) and item.grad_fn is not None:
            if walk:
                extras.append(fp.bytes - tensor_footprint(item, graphs=False).bytes)
            else:
                unwalked += 1
        per_item.add(fp)
    if extras and unwalked:
        per_item.bytes += unwalked * sum(extras) / len(extras)
    total.add(per_item, size / len(sample))
    return total
