"""State the interpreter and torch keep per use, named as a user would write it.

Interpreter registries that grow with use: the ``__warningregistry__`` of each module (one
entry per distinct warning message and line: a message with a per-step number in it adds
one every step), ``warnings.filters`` and ``warnings.onceregistry``, ``linecache.cache``,
``sys.modules`` and ``copyreg.dispatch_table``. Each is measured as one holder.

Torch switches that keep memory per step while they stay on, read at the step boundary
(``switch`` samples, length 1 while on): the training loop running inside one
``torch.autocast`` block (its cast cache keeps a cast copy of every tensor that requires
grad until the block exits), the profiler recording, anomaly mode, saved-tensor hooks. The
analysis names the one that is on when the process grows and no holder explains it.
"""

from __future__ import annotations

import sys
from types import ModuleType
from collections.abc import Iterator
from typing import Any

from torchleak.record.probes import access
from torchleak.record.probes.holder_sample import HolderSample
from torchleak.record.probes.sizes import container_footprint

_WARNING_REGISTRIES = 3  # the largest per-module registries measured at each walk
_MIN_REGISTRY = 16  # entries below which a module's registry is not worth a holder


def interpreter_samples() -> Iterator[HolderSample]:
    yield from _warning_registries()
    for path, owner, name, mechanism in (
            ("warnings.filters", "warnings", "filters", "warnings_filters"),
            ("warnings.onceregistry", "warnings", "onceregistry", "warning_registry"),
            ("linecache.cache", "linecache", "cache", "linecache"),
            ("copyreg.dispatch_table", "copyreg", "dispatch_table", "copyreg")):
        module = sys.modules.get(owner)
        table = access.attribute(module, name) if module is not None else None
        if table is not None and access.container_base(table) is not None:
            yield _sample(path, table, path, mechanism)
    yield _sample("sys.modules", sys.modules, "sys.modules", "sys_modules")


# A table's bytes by (id, length): these tables change size when they change at all, and
# sizing one walks its sampled entries (a module each, for sys.modules) at every walk.
_sized: dict[tuple[int, int], int] = {}


def _sample(path: str, table: Any, label: str, mechanism: str) -> HolderSample:
    length = access.length(table)
    key = (id(table), length)
    size = _sized.get(key)
    if size is None:
        if len(_sized) > 256:
            _sized.clear()
        size = _sized[key] = int(container_footprint(table, depth=1).bytes)
    return HolderSample(path, "container", type(table).__name__, length, size,
                        detail={"label": label, "mechanism": mechanism})


FULL_SCAN_EVERY = 4  # walks between two scans of every module for a new registry


class _RegistryScan:
    """Which modules have a ``__warningregistry__`` worth reading. Every module is looked
    at (thousands with torch in, ~1 ms a walk with cold caches) when the module count
    changed or every ``FULL_SCAN_EVERY`` walks; in between only the modules found with
    one. Names only: a module is looked up again each walk, never kept."""

    def __init__(self) -> None:
        self.names: list[str] = []
        self.modules = -1
        self.walks = 0

    def candidates(self) -> list[str]:
        self.walks += 1
        if len(sys.modules) != self.modules or self.walks % FULL_SCAN_EVERY == 0:
            self.modules = len(sys.modules)
            self.names = [name for name, module in list(sys.modules.items())
                          if _registry(module) is not None]
        return self.names


_scan = _RegistryScan()


def _registry(module: Any) -> Any:
    # A plain module's dict is read directly (the general, guarded read costs ~2 us each);
    # anything else goes through ``access``.
    attrs = module.__dict__ if type(module) is ModuleType else (
        access.instance_dict(module) if module is not None else None)
    return attrs.get("__warningregistry__") if attrs is not None else None


def _warning_registries() -> Iterator[HolderSample]:
    found, seen = [], set()
    for name in _scan.candidates():
        registry = _registry(sys.modules.get(name))
        if registry is None:
            continue
        if id(registry) in seen:  # one module under two names (__main__, __mp_main__)
            continue
        if access.container_base(registry) is dict and dict.__len__(registry) >= _MIN_REGISTRY:
            seen.add(id(registry))
            found.append((dict.__len__(registry), name, registry))
    for _size, name, registry in sorted(found, key=lambda f: -f[0])[:_WARNING_REGISTRIES]:
        yield _sample(f"{name}.__warningregistry__", registry,
                      f"__warningregistry__ of module {name}", "warning_registry")


def torch_switches() -> Iterator[HolderSample]:
    """The switches on at this boundary (each a ``switch`` sample of length 1)."""
    torch = sys.modules.get("torch")
    if torch is None:
        return
    for mechanism, label, on in (
            ("autocast", "torch.autocast cast cache", _autocast_on(torch)),
            ("profiler", "torch.profiler recording", _profiler_on(torch)),
            ("anomaly_mode", "autograd anomaly mode", _call(torch.is_anomaly_enabled)),
            ("saved_tensor_hooks", "saved-tensor hooks (torch.autograd.graph)",
             _saved_hooks_on(torch))):
        if on:
            yield HolderSample(f"torch switch {mechanism}", "switch", mechanism, 1,
                               detail={"label": label, "mechanism": mechanism})


def _call(fn: Any, *args: Any) -> bool:
    try:
        return bool(fn(*args))
    except Exception:  # noqa: BLE001 - an older torch without this switch
        return False


def _autocast_on(torch: Any) -> bool:
    """The boundary is inside an autocast block with its cache on: the loop runs in one."""
    if not _call(torch.is_autocast_cache_enabled):
        return False
    return any(_call(torch.is_autocast_enabled, device) for device in ("cpu", "cuda")) or \
        _call(torch.is_autocast_enabled)


def _profiler_on(torch: Any) -> bool:
    autograd = getattr(torch, "_C", None)
    enabled = getattr(getattr(autograd, "_autograd", None), "_profiler_enabled", None)
    return _call(enabled) if enabled is not None else False


def _saved_hooks_on(torch: Any) -> bool:
    top = getattr(getattr(torch._C, "_autograd", None), "_top_saved_tensors_default_hooks", None)
    if top is None:
        return False
    try:
        return top(False) is not None
    except TypeError:
        return _call(top)
    except Exception:  # noqa: BLE001
        return False
