"""Cheap size estimates for what a container holds (sampled, never a full deep walk)."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any

import torch

from torchleak.record.probes.graph import walk_graph

_SAMPLE = 8
_GRAPH_SAMPLES = 2
_GRAPH_NODES_PER_ITEM = 256  # per sampled item: enough for one step's graph
_NODE_BYTES = 200  # an autograd node with its edges, measured order of magnitude
_SCALARS = (int, float, bool, complex, str, bytes, type(None))


@dataclass
class Footprint:
    bytes: float = 0.0
    tensors: float = 0.0
    tensor_bytes: float = 0.0
    grad_fn_tensors: float = 0.0

    def add(self, other: Footprint, weight: float = 1.0) -> None:
        self.bytes += other.bytes * weight
        self.tensors += other.tensors * weight
        self.tensor_bytes += other.tensor_bytes * weight
        self.grad_fn_tensors += other.grad_fn_tensors * weight


def tensor_footprint(t: torch.Tensor, graphs: bool = True) -> Footprint:
    try:
        nbytes = t.untyped_storage().nbytes()
    except Exception:  # noqa: BLE001 - sparse, meta, fake and nested tensors
        nbytes = t.numel() * t.element_size() if t.layout == torch.strided else 0
    if t.grad_fn is None or not graphs:
        has_graph = 0.0 if t.grad_fn is None else 1.0
        return Footprint(float(nbytes + sys.getsizeof(t)), 1.0, float(nbytes), has_graph)
    # Retained size includes what the graph keeps: saved activations (never freed when no
    # backward ran) and ~200 B per node.
    graph = walk_graph([t.grad_fn], _GRAPH_NODES_PER_ITEM)
    saved = sum(b for ptr, b in graph.saved.items() if ptr != _data_ptr(t))
    retained = nbytes + saved + graph.nodes * _NODE_BYTES + sys.getsizeof(t)
    return Footprint(float(retained), 1.0, float(nbytes), 1.0)


def _data_ptr(t: torch.Tensor) -> int:
    try:
        return t.untyped_storage().data_ptr()
    except Exception:  # noqa: BLE001
        return -1


def element_footprint(obj: Any, depth: int = 2, graphs: bool = True) -> Footprint:
    """Footprint of one element, looking ``depth`` levels into tuples/lists/dicts."""
    if isinstance(obj, torch.Tensor):
        return tensor_footprint(obj, graphs)
    if isinstance(obj, _SCALARS) or depth <= 0:
        return Footprint(float(sys.getsizeof(obj)))
    if isinstance(obj, dict):
        return container_footprint(obj, depth - 1)
    if isinstance(obj, (list, tuple, set, frozenset)):
        return container_footprint(obj, depth - 1)
    return Footprint(float(sys.getsizeof(obj)))


def sample_items(obj: Any, n: int = _SAMPLE) -> list[Any]:
    """Up to n elements spread over the container, without copying it."""
    size = len(obj)
    if size == 0:
        return []
    if isinstance(obj, dict):
        values = iter(obj.values())
        return [v for _, v in zip(range(n), values)]
    if isinstance(obj, (list, tuple)):
        stride = max(1, size // n)
        return [obj[i] for i in range(0, size, stride)][:n]
    # deque / set: both ends are cheap, the middle is not.
    items = []
    for i, item in enumerate(obj):
        if i >= n:
            break
        items.append(item)
    return items


def container_footprint(obj: Any, depth: int = 2) -> Footprint:
    size = len(obj)
    total = Footprint(float(sys.getsizeof(obj)))
    sample = sample_items(obj)
    if not sample:
        return total
    per_item = Footprint()
    extras: list[float] = []  # what walked graphs retain beyond their tensor
    unwalked = 0
    for i, item in enumerate(sample):
        # Walking an item's autograd graph is the dear part: the last two sampled items
        # (the newest) stand for the others that carry a graph.
        walk = i >= len(sample) - _GRAPH_SAMPLES
        fp = element_footprint(item, depth, walk)
        if isinstance(item, torch.Tensor) and item.grad_fn is not None:
            if walk:
                extras.append(fp.bytes - tensor_footprint(item, graphs=False).bytes)
            else:
                unwalked += 1
        per_item.add(fp)
    if extras and unwalked:
        per_item.bytes += unwalked * sum(extras) / len(extras)
    total.add(per_item, size / len(sample))
    return total
