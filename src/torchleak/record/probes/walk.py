"""One holder walk: breadth first from the roots, within an object budget (see holders)."""

from __future__ import annotations

import collections
import functools
import gc
import sys
from types import (BuiltinFunctionType, FrameType, FunctionType, GeneratorType, MethodType,
                   ModuleType)
from typing import TYPE_CHECKING, Any

import torch
from torch.utils.data import DataLoader

from torchleak.record.probes.graph import walk_graph
from torchleak.record.probes.holder_sample import HolderSample, Route, hooks_sample
from torchleak.record.probes.sizes import container_footprint, sample_items, tensor_footprint
from torchleak.record.probes.usercode import is_user_file
from torchleak.trace.schema import GRAPH_NODES_CAP

if TYPE_CHECKING:
    from torchleak.record.probes.holders import HolderWalker

_CONTAINERS = (list, tuple, dict, set, frozenset, collections.deque)
_SKIP = (ModuleType, type, BuiltinFunctionType, str, bytes, int, float, bool,
         complex, type(None), FrameType)
MAX_DEPTH = 10  # hops from a root; the object budget bounds the cost
ATTRIBUTE_SET_MIN = 8  # objects with this many attributes get a holder for the set
LIBRARY_DEPTH = 4  # library objects are walked this deep; the user's own classes to MAX_DEPTH
# C objects without a __dict__ that can hold user data (itertools.cycle saves every item).
_OPAQUE_MODULES = frozenset({"itertools", "functools", "collections", "builtins", "_collections"})
# What nn.Module.__init__ itself sets: torch's bookkeeping, walked through its own code.
_MODULE_INTERNALS = frozenset(vars(torch.nn.Module()).keys())
_HOOK_TABLES = ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks",
                "_backward_pre_hooks", "_state_dict_hooks", "_load_state_dict_pre_hooks")
_LRU = type(functools.lru_cache(maxsize=None)(lambda: None))
_BIG_DATASET_ATTR = 10_000
# Counting a graph costs ~1 µs a node. Past the cap a holder is known to grow (the
# analysis judges the uncapped samples) and its graph is not walked again.
GRAPH_CAP = GRAPH_NODES_CAP
QUICK_GRAPH_LIMIT = 1_000  # quick re-measures skip graphs bigger than this (~1 ms to count)


_KEY_TYPES = (str, int, float, bool, type(None))


def _key_part(key: Any, index: int) -> str:
    """A dict key in a path; never ``repr`` of an arbitrary object (a tensor key's repr
    formats the whole tensor: an optimizer's state is keyed by parameters)."""
    if isinstance(key, str) and key.isidentifier():
        return f".{key}"
    if isinstance(key, _KEY_TYPES) or (isinstance(key, tuple) and len(key) <= 4 and all(
            isinstance(k, _KEY_TYPES) for k in key)):
        return f"[{key!r:.40}]"
    return f"[<{type(key).__name__} #{index}>]"


@functools.lru_cache(maxsize=1024)
def _user_class(cls: type) -> bool:
    module = sys.modules.get(cls.__module__)
    return is_user_file(getattr(module, "__file__", "") or "")


def _user_attrs(obj: Any) -> dict[str, Any]:
    """An object's own attributes (a module's without torch's bookkeeping)."""
    attrs = getattr(obj, "__dict__", None)
    if not isinstance(attrs, dict):
        return _slots(obj)
    skip = _MODULE_INTERNALS if isinstance(obj, torch.nn.Module) else frozenset()
    return {k: v for k, v in attrs.items() if k not in skip and not k.startswith("__")}


def _slots(obj: Any) -> dict[str, Any]:
    """Attributes of a ``__slots__`` instance (``@dataclass(slots=True)``)."""
    found: dict[str, Any] = {}
    for cls in type(obj).__mro__:
        names = cls.__dict__.get("__slots__", ())
        for name in (names,) if isinstance(names, str) else names:
            if name not in found and not name.startswith("__"):
                try:
                    found[name] = getattr(obj, name)
                except AttributeError:  # an unset slot
                    continue
    return found


def count_graph_nodes(grad_fn: Any, cap: int) -> int:
    """Autograd nodes reachable from ``grad_fn``, at most ``cap``."""
    return walk_graph([grad_fn], cap, with_saved=False).nodes


class Walk:
    def __init__(self, walker: HolderWalker) -> None:
        self.w = walker
        self.visited: set[int] = set()
        self.queue: collections.deque[tuple[Any, str, int]] = collections.deque()
        self.samples: list[HolderSample] = []
        self.seen_classes: set[type] = set()
        self.labels: dict[str, str] = {}
        self.routes: dict[str, Route] = {}
        self.labels: dict[str, str] = {}
        self.sample_routes: dict[str, Route] = {}

    def enqueue(self, obj: Any, path: str, depth: int, label: str | None = None,
                route: Route | None = None) -> None:
        """``label``: how a person names it, e.g. ``Trainer.outputs`` for ``fit().t.outputs``;
        ``route``: how to find it again without holding it (see ``resolve``)."""
        if label is not None:
            self.labels[path] = label
        if route is not None:
            self.routes.setdefault(path, route)
        if depth <= MAX_DEPTH and not isinstance(obj, _SKIP) or isinstance(obj, type):
            self.queue.append((obj, path, depth))

    def run(self) -> None:
        while self.queue and len(self.visited) < self.w.max_objects:
            obj, path, depth = self.queue.popleft()
            if id(obj) in self.visited:
                continue
            self.visited.add(id(obj))
            try:
                self.visit(obj, path, depth)
            except Exception:  # noqa: BLE001 - odd user objects must not stop the walk
                continue

    def _route(self, path: str, step: tuple[Any, ...]) -> Route | None:
        parent = self.routes.get(path)
        return None if parent is None else parent + (step,)

    def record(self, sample: HolderSample, route: Route | None = None) -> None:
        route = route or sample.route or self.routes.get(sample.holder)
        if route is not None:
            self.sample_routes[sample.holder] = route
        label = self.labels.get(sample.holder)
        if label is not None:
            sample.detail["label"] = label
        if len(self.samples) < self.w.max_samples:
            self.samples.append(sample)

    def measure(self, obj: Any, path: str, route: Route) -> None:
        """One known holder again, by kind (used by ``HolderWalker.remeasure``)."""
        if path.startswith("lru_cache "):
            self.cache(obj, path.split(" ", 1)[1][:-2])
        elif path.endswith("._modules") and isinstance(obj, torch.nn.Module):
            self.submodules(obj, path[: -len("._modules")])
        elif path.endswith(".__dict__"):
            self.attribute_set(_user_attrs(obj), path[: -len(".__dict__")], type(obj).__name__)
        elif isinstance(obj, torch.nn.Module):
            self.module_hooks(obj, path.rsplit(".", 1)[0])
        elif isinstance(obj, torch.Tensor):
            if obj.grad_fn is not None and self.w.last_nodes.get(path, 0) >= QUICK_GRAPH_LIMIT:
                return  # a big graph is counted by full walks only: quick must stay quick
            self.tensor(obj, path)
        elif isinstance(obj, _CONTAINERS):
            self.container(obj, path, depth=99)

    def visit(self, obj: Any, path: str, depth: int) -> None:
        if isinstance(obj, torch.Tensor):
            self.tensor(obj, path)
        elif isinstance(obj, _CONTAINERS):
            self.container(obj, path, depth)
        elif isinstance(obj, type):
            self.user_class(obj, path, depth)
        elif isinstance(obj, _LRU):
            self.cache(obj, path)
        elif isinstance(obj, torch.nn.Module):
            self.module(obj, path, depth)
        elif isinstance(obj, DataLoader):
            self.dataloader(obj, path, depth)
        elif isinstance(obj, MethodType):
            # A bound method (an event handler, a callback) keeps its object alive.
            self.enqueue(obj.__self__, f"{path}.__self__", depth + 1,
                         type(obj.__self__).__name__, self._route(path, ("attr", "__self__")))
        elif isinstance(obj, FunctionType):
            self.closure(obj, path, depth)
        elif isinstance(obj, GeneratorType):
            self.generator(obj, path, depth)
        elif type(obj).__module__ == "numpy" and hasattr(obj, "nbytes"):
            self.array(obj, path)
        else:
            self.instance(obj, path, depth)

    def closure(self, fn: FunctionType, path: str, depth: int) -> None:
        """Variables a user's closure captured (a list a nested function appends to)."""
        cells = fn.__closure__
        if not cells or not is_user_file(fn.__code__.co_filename):
            return
        for var, cell in zip(fn.__code__.co_freevars, cells):
            try:
                value = cell.cell_contents
            except ValueError:  # an empty cell
                continue
            self.enqueue(value, f"{path}.<closure>.{var}", depth + 1,
                         f"closure variable {var} of {fn.__qualname__}()")

    def generator(self, gen: GeneratorType, path: str, depth: int) -> None:
        """A suspended generator's locals (a streaming shuffle buffer)."""
        frame = gen.gi_frame
        if frame is None or not is_user_file(frame.f_code.co_filename):
            return
        name = gen.__qualname__
        for var, value in frame.f_locals.items():
            self.enqueue(value, f"{path}.<{name}>.{var}", depth + 1,
                         f"local {var} of generator {name}()")

    def array(self, arr: Any, path: str) -> None:
        """numpy arrays are measured like tensors (a feature bank grown by concatenate)."""
        if arr.size < 4096:
            return
        self.record(HolderSample(path, "tensor", f"numpy.{type(arr).__name__}", int(arr.size),
                                 int(arr.nbytes), 1, int(arr.nbytes), 0, None,
                                 {"shape": list(arr.shape), "dtype": str(arr.dtype)}))

    def tensor(self, t: torch.Tensor, path: str) -> None:
        self.tensor_hooks(t, path)
        if isinstance(t, torch.nn.Parameter):
            return
        has_graph = t.grad_fn is not None
        if not has_graph and t.numel() < 4096:
            return
        fp = tensor_footprint(t)
        nodes = None
        if has_graph:
            if path in self.w._capped_graphs:
                nodes = self.w.graph_cap
            else:
                nodes = count_graph_nodes(t.grad_fn, self.w.graph_cap)
                self.w.last_nodes[path] = nodes
                if nodes >= self.w.graph_cap:
                    self.w._capped_graphs.add(path)
        self.record(HolderSample(path, "tensor", type(t).__name__, int(t.numel()), int(fp.bytes),
                                 1, int(fp.tensor_bytes), int(has_graph), nodes,
                                 {"shape": list(t.shape), "dtype": str(t.dtype),
                                  "device": str(t.device)}))

    def container(self, obj: Any, path: str, depth: int) -> None:
        size = len(obj)
        if size and (size >= 64 or not isinstance(obj, tuple)):  # short tuples cannot grow
            fp = container_footprint(obj)
            detail: dict[str, Any] = {}
            if isinstance(obj, collections.deque) and obj.maxlen is not None:
                detail["maxlen"] = obj.maxlen
            items = sample_items(obj, 1)
            if items:
                detail["item_type"] = type(items[0]).__name__
            self.record(HolderSample(path, "container", type(obj).__name__, size, int(fp.bytes),
                                     int(fp.tensors), int(fp.tensor_bytes),
                                     int(fp.grad_fn_tensors), None, detail))
        if size > 64 or depth >= MAX_DEPTH:
            return  # a long container is measured, not walked
        parent = self.labels.get(path)
        if isinstance(obj, dict):
            for i, (key, value) in enumerate(list(obj.items())):
                part = _key_part(key, i)
                self.enqueue(value, path + part, depth + 1,
                             parent + part if parent and not parent.startswith(("local ", "global ")) else None,
                             # Never keep a reference to an object key (a Parameter).
                             self._route(path, ("key", key)) if isinstance(key, _KEY_TYPES)
                             else None)
        else:
            for i, value in enumerate(list(obj)):
                if not isinstance(value, torch.Tensor):  # elements are in the footprint
                    self.enqueue(value, f"{path}[{i}]", depth + 1, None,
                                 self._route(path, ("index", i)))

    def module(self, mod: torch.nn.Module, path: str, depth: int) -> None:
        self.module_hooks(mod, path)
        self._module_children(mod, path, depth)

    def module_hooks(self, mod: torch.nn.Module, path: str) -> None:
        hooks: list[Any] = []
        for table in _HOOK_TABLES:
            hooks.extend(getattr(mod, table, {}).values())
        if hooks:
            table = "_forward_hooks" if mod._forward_hooks else "hooks"
            sample = hooks_sample(f"{path}.{table}", hooks, type(mod).__name__)
            sample.detail["label"] = f"{type(mod).__name__}.{table}"
            self.record(sample, self.routes.get(path))

    def tensor_hooks(self, t: torch.Tensor, path: str) -> None:
        """``tensor.register_hook`` every step: hooks pile up in ``_backward_hooks``."""
        hooks = getattr(t, "_backward_hooks", None)
        if hooks:
            sample = hooks_sample(f"{path}._backward_hooks", list(hooks.values()),
                                   type(t).__name__)
            sample.detail["label"] = f"{path.rsplit('.', 1)[-1]}._backward_hooks (tensor hooks)"
            self.record(sample, self.routes.get(path))

    def _module_children(self, mod: torch.nn.Module, path: str, depth: int) -> None:
        self.submodules(mod, path)
        for name, child in mod._modules.items():
            if child is not None:
                self.enqueue(child, f"{path}.{name}", depth + 1, None,
                             self._route(path, ("child", name)))
        for name, param in mod._parameters.items():
            if param is not None and getattr(param, "_backward_hooks", None):
                self.tensor_hooks(param, f"{path}.{name}")
        owner = type(mod).__name__
        attrs = _user_attrs(mod)
        self.attribute_set(attrs, path, owner)
        for name, value in attrs.items():
            self.enqueue(value, f"{path}.{name}", depth + 1, f"{owner}.{name}",
                         self._route(path, ("attr", name)))
        self.user_class(type(mod), type(mod).__name__, depth + 1)

    def submodules(self, mod: torch.nn.Module, path: str) -> None:
        """A module that gains children (a ModuleDict of adapters, a growing ModuleList):
        the count of its children and the bytes of their own parameters."""
        children = [c for c in mod._modules.values() if c is not None]
        if len(children) < 2:
            return
        nbytes = sum(p.numel() * p.element_size() for c in children
                     for p in c._parameters.values() if p is not None)
        self.labels.setdefault(f"{path}._modules", f"{type(mod).__name__}._modules (submodules)")
        self.record(HolderSample(f"{path}._modules", "container", type(mod).__name__,
                                 len(children), int(nbytes), detail={"item_type": "Module"}),
                    self.routes.get(path))

    def attribute_set(self, attrs: dict[str, Any], path: str, owner: str) -> None:
        """An object that gains attributes (``setattr(self, f"act_{step}", t)``): each new
        name is a new path, so only the set as a whole shows the growth."""
        if len(attrs) < ATTRIBUTE_SET_MIN:
            return
        fp = container_footprint(attrs)
        self.labels.setdefault(f"{path}.__dict__", f"{owner}.__dict__ (attributes)")
        self.record(HolderSample(f"{path}.__dict__", "container", f"{owner} attributes",
                                 len(attrs), int(fp.bytes), int(fp.tensors), int(fp.tensor_bytes),
                                 int(fp.grad_fn_tensors), None, {"item_type": "attribute"}),
                    self.routes.get(path))

    def instance(self, obj: Any, path: str, depth: int) -> None:
        if isinstance(obj, torch.optim.Optimizer):
            self.optimizer(obj, path)
            return
        if depth >= LIBRARY_DEPTH and not _user_class(type(obj)):
            return  # deep inside a library object (a logging.Logger's registry of all loggers)
        attrs = getattr(obj, "__dict__", None)
        if not isinstance(attrs, dict):
            attrs = _slots(obj)
        if not attrs:
            self.opaque(obj, path, depth)
            return
        owner = type(obj).__name__
        self.attribute_set(attrs, path, owner)
        for name, value in list(attrs.items()):
            if not name.startswith("__"):
                self.enqueue(value, f"{path}.{name}", depth + 1, f"{owner}.{name}",
                             self._route(path, ("attr", name)))
        self.user_class(type(obj), type(obj).__name__, depth + 1)

    def optimizer(self, opt: torch.optim.Optimizer, path: str) -> None:
        """Its param groups and state, measured, not walked: state fills once on the first
        step (healthy, H3); groups and state that keep growing are a leak."""
        owner = type(opt).__name__
        for name in ("param_groups", "state"):
            value = getattr(opt, name, None)
            if isinstance(value, (list, dict)):
                self.labels[f"{path}.{name}"] = f"{owner}.{name}"
                route = self._route(path, ("attr", name))
                if route is not None:
                    self.routes.setdefault(f"{path}.{name}", route)
                self.container(value, f"{path}.{name}", depth=MAX_DEPTH)

    def opaque(self, obj: Any, path: str, depth: int) -> None:
        """C objects with no __dict__ (itertools.cycle, functools.partial): what they hold."""
        if type(obj).__module__ not in _OPAQUE_MODULES:
            return
        for i, ref in enumerate(gc.get_referents(obj)):
            if not isinstance(ref, type):
                self.enqueue(ref, f"{path}.<{type(obj).__name__}[{i}]>", depth + 1)

    def user_class(self, cls: type, path: str, depth: int) -> None:
        """Class-level caches and registries (lru_cache on methods, class lists)."""
        if cls in self.seen_classes or not is_user_file(getattr(
                sys.modules.get(cls.__module__), "__file__", "") or ""):
            return
        self.seen_classes.add(cls)
        for name, value in list(vars(cls).items()):
            if isinstance(value, (staticmethod, classmethod)):
                value = value.__func__
            if isinstance(value, _LRU) or (isinstance(value, _CONTAINERS) and not name.startswith("__")):
                self.enqueue(value, f"{cls.__name__}.{name}", depth)

    def cache(self, fn: Any, path: str) -> None:
        info = fn.cache_info()
        if info.currsize == 0:
            return
        name = getattr(fn, "__qualname__", path)
        self.record(HolderSample(f"lru_cache {name}()", "cache", "lru_cache", info.currsize,
                                 route=self.routes.get(path),
                                 detail={"maxsize": info.maxsize, "function": name,
                                         "path": path, "hits": info.hits,
                                         "misses": info.misses}))

    def dataloader(self, loader: DataLoader, path: str, depth: int) -> None:
        dataset = loader.dataset
        big = {}
        for name, value in list(getattr(dataset, "__dict__", {}).items()):
            if isinstance(value, _CONTAINERS) and len(value) >= _BIG_DATASET_ATTR:
                items = sample_items(value, 1)
                big[name] = {"type": type(value).__name__, "length": len(value),
                             "item_type": type(items[0]).__name__ if items else None}
        self.record(HolderSample(f"{path} (DataLoader)", "dataloader", type(dataset).__name__,
                                 int(loader.num_workers),
                                 detail={"dataset": type(dataset).__name__,
                                         "num_workers": loader.num_workers,
                                         "persistent_workers": loader.persistent_workers,
                                         "big_attributes": big}))
        self.enqueue(dataset, f"{path}.dataset", depth + 1, None, self._route(path, ("attr", "dataset")))

    def extra_registries(self) -> None:
        helpers = sys.modules.get("matplotlib._pylab_helpers")
        if helpers is not None:
            figs = helpers.Gcf.figs
            self.record(HolderSample("matplotlib.pyplot open figures", "figures", "Figure",
                                     len(figs), detail={"numbers": list(figs)[-5:]}))
        module_mod = sys.modules.get("torch.nn.modules.module")
        for table in ("_global_forward_hooks", "_global_forward_pre_hooks",
                      "_global_backward_hooks"):
            hooks = getattr(module_mod, table, None)
            if hooks:
                self.record(hooks_sample(f"torch.nn.modules.module.{table}",
                                          list(hooks.values()), "global"))


