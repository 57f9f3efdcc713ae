"""Walk autograd graphs: how many nodes, and which saved tensors they keep alive.

Nodes are reached through ``next_functions``; saved tensors through the ``_saved_*``
attributes PyTorch exposes on each node type. After ``backward()`` the saved tensors of a
graph are freed (unpacking them raises), so a kept graph costs its nodes only; a graph
that was never backpropagated (evaluation without ``no_grad``) keeps its activations.
Leaf tensors that require grad (parameters) are saved by reference, never leaked by a
graph, and are not counted.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import torch

_SAVED_ATTRS: dict[type, tuple[str, ...]] = {}


@dataclass
class GraphStats:
    nodes: int = 0
    saved: dict[int, int] = field(default_factory=dict)  # storage ptr -> bytes
    saved_cuda: set[int] = field(default_factory=set)  # those of them on a CUDA device
    truncated: bool = False
    leaves: int = 0  # AccumulateGrad nodes: the parameters (leaf tensors) the graph reaches


def _saved_attrs(node: Any) -> tuple[str, ...]:
    cls = type(node)
    names = _SAVED_ATTRS.get(cls)
    if names is None:
        names = tuple(n for n in dir(cls) if n.startswith("_saved_"))
        _SAVED_ATTRS[cls] = names
    return names


def walk_graph(roots: list[Any], node_cap: int, seconds: float | None = None,
               with_saved: bool = True, with_leaves: bool = False) -> GraphStats:
    """Nodes reachable from ``roots`` (at most ``node_cap``, within ``seconds``);
    ``with_leaves``: also count the leaf nodes (one per parameter: torch reuses a leaf's
    node while it lives, so a graph chained over many steps reaches the same ones)."""
    stats = GraphStats()
    seen: dict[int, Any] = {}  # keeps the wrappers alive so ids stay unique during the walk
    # Each node carries whether its saved tensors may still be there: backward() frees
    # those of every node it reached, so below a freed node nothing is asked again (each
    # ask would cost an exception), while another root's graph is asked afresh.
    stack = [(r, with_saved) for r in roots if r is not None]
    deadline = None if seconds is None else time.perf_counter() + seconds
    while stack:
        if len(seen) >= node_cap or (deadline is not None and len(seen) % 256 == 0
                                     and time.perf_counter() > deadline):
            stats.truncated = True
            break
        node, ask = stack.pop()
        if id(node) in seen:
            continue
        seen[id(node)] = node
        if with_leaves and type(node).__name__ == "AccumulateGrad":
            stats.leaves += 1
        if ask:
            for name in _saved_attrs(node):
                if not _add_saved(node, name, stats):
                    ask = False  # freed by backward()
                    break
        for child, _ in getattr(node, "next_functions", ()):
            if child is not None:
                stack.append((child, ask))
    stats.nodes = len(seen)
    return stats


def _add_saved(node: Any, name: str, stats: GraphStats) -> bool:
    """Add one saved value's storages; False when backward() has freed them."""
    try:
        value = getattr(node, name)
    except Exception as err:  # noqa: BLE001
        # Freed by backward() ("graph a second time ... already been freed"): so is the
        # rest of that graph. Any other refusal (a saved parameter changed in place by
        # optimizer.step() since) is this value's alone: the node's others still count.
        return "freed" not in str(err)
    for v in value if isinstance(value, tuple) else (value,):
        if not isinstance(v, torch.Tensor) or (v.is_leaf and v.requires_grad):
            continue
        try:
            storage = v.untyped_storage()
            stats.saved.setdefault(storage.data_ptr(), storage.nbytes())
            if v.is_cuda:
                stats.saved_cuda.add(storage.data_ptr())
        except Exception:  # noqa: BLE001 - meta/sparse tensors
            continue
    return True
