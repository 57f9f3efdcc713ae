"""Which role each live tensor storage plays: parameters, gradients, optimizer state,
tensors kept by autograd graphs, or the rest.

Every storage is counted once, in the first role that claims it (a parameter's storage
is a parameter even when a list also holds it or a graph saved it). Parameters are the
``nn.Parameter`` objects the census found; gradients are their ``.grad`` (read through
the C descriptor, never a subclass's property); optimizer state is every tensor in
``Optimizer.state`` of the optimizers the same scan found (read through the builtin
``dict``, never a user subclass's methods); ``autograd_saved`` is every other storage a
live graph saved for backward, whether or not a Python tensor wraps it (torch keeps a
saved tensor's Python object alive with it, so most do). Storages on a CUDA device go to
the ``cuda_`` twin of their role; other devices (meta, fake) hold no memory and are left
out.
"""

from __future__ import annotations

from collections.abc import Container, Iterable, Mapping
from typing import Any

import torch

from torchleak.record.probes.access import attribute, dict_items, is_a

_TENSOR_BASE: Any = getattr(torch._C, "TensorBase", None) or getattr(torch._C, "_TensorBase")
_GRAD = _TENSOR_BASE.__dict__["grad"]


class StorageRoles:
    """Storage pointer -> (bytes, device kind, role), first claim wins."""

    def __init__(self, saved: Mapping[int, int], saved_cuda: Container[int]) -> None:
        self.saved = saved  # storage ptr -> bytes of what live graphs saved for backward
        self.saved_cuda = saved_cuda  # those of them on a CUDA device
        self.bytes: dict[int, int] = {}
        self.role: dict[int, str] = {}
        self.cuda: set[int] = set()
        self.skipped: set[int] = set()  # storages on devices that hold no host/CUDA memory

    def claim(self, tensor: Any, role: str) -> None:
        try:
            storage = tensor.untyped_storage()
            ptr, nbytes = storage.data_ptr(), storage.nbytes()
            device = tensor.device.type
        except Exception:  # noqa: BLE001 - sparse/meta/fake tensors have no plain storage
            return
        if ptr in self.role or ptr in self.skipped:
            return
        if device not in ("cpu", "cuda"):
            self.skipped.add(ptr)
            return
        if role == "other_tensors" and ptr in self.saved:
            role = "autograd_saved"
        self.role[ptr], self.bytes[ptr] = role, nbytes
        if device == "cuda":
            self.cuda.add(ptr)

    def totals(self) -> dict[str, int]:
        """Bytes per category; graph-saved storages no Python tensor holds are
        ``autograd_saved`` too."""
        found: dict[str, int] = {}
        for ptr, role in self.role.items():
            name = f"cuda_{role}" if ptr in self.cuda else role
            found[name] = found.get(name, 0) + self.bytes[ptr]
        for ptr, nbytes in self.saved.items():
            if ptr not in self.role and ptr not in self.skipped:
                name = "cuda_autograd_saved" if ptr in self.saved_cuda else "autograd_saved"
                found[name] = found.get(name, 0) + nbytes
        return found


def subclasses(cls: type) -> set[type]:
    """``cls`` and every subclass defined so far (user optimizers derive from torch's)."""
    found: set[type] = set()
    stack = [cls]
    while stack:
        current = stack.pop()
        if current not in found:
            found.add(current)
            stack.extend(type.__subclasses__(current))
    return found


def tensor_roles(tensors: list[Any], optimizers: Iterable[Any], saved: Mapping[int, int],
                 saved_cuda: Container[int]) -> StorageRoles:
    """Classify the census's tensors (and the gradients/state no Python object wraps);
    ``saved``: the storages the live graphs saved, ``saved_cuda`` those on a GPU."""
    roles = StorageRoles(saved, saved_cuda)
    params = [t for t in tensors if is_a(t, torch.nn.Parameter)]
    for p in params:
        roles.claim(p, "parameters")
    for p in params:
        grad = _GRAD.__get__(p)
        if grad is not None:
            roles.claim(grad, "gradients")
    for optimizer in optimizers:
        for tensor in _state_tensors(optimizer):
            roles.claim(tensor, "optimizer_state")
    for t in tensors:
        roles.claim(t, "other_tensors")
    return roles


def _state_tensors(optimizer: Any) -> list[Any]:
    """Tensors in ``optimizer.state`` (param -> {name: value}), read without user code."""
    state = attribute(optimizer, "state")
    if not is_a(state, dict):
        return []
    found = []
    for _param, per_param in dict_items(state):
        if is_a(per_param, dict):
            found.extend(v for _, v in dict_items(per_param) if is_a(v, torch.Tensor))
    return found
