"""One holder walk: breadth first from the roots, within an object budget (see holders).

Every object is read through ``access`` (no user code runs, nothing is kept): the walk
holds references only while it runs, and what it leaves behind is paths, labels and
routes made of names and plain keys.
"""

from __future__ import annotations

import collections
import functools
import gc
import io
import sys
import weakref
from types import (BuiltinFunctionType, FrameType, FunctionType, GeneratorType, MethodType,
                   ModuleType)
from typing import Any

import torch
from torch.utils.data import DataLoader

from torchleak.record.probes import access
from torchleak.record.probes.graph import walk_graph
from torchleak.record.probes.holder_sample import HolderSample, Route, hooks_sample
from torchleak.record.probes.sizes import container_footprint, sample_items, tensor_footprint
from torchleak.system.userfiles import is_user_file
from torchleak.trace.schema import GRAPH_NODES_CAP


_SKIP = (ModuleType, BuiltinFunctionType, int, float, bool, complex, type(None), FrameType)
_BUFFERS = (bytearray, str, bytes, io.BytesIO, io.StringIO)
MIN_BUFFER_BYTES = 4096  # smaller strings and buffers are not worth a holder row
MAX_DEPTH = 10  # hops from a root; the object budget bounds the cost
ATTRIBUTE_SET_MIN = 8  # objects with this many attributes get a holder for the set
LIBRARY_DEPTH = 4  # library objects are walked this deep; the user's own classes to MAX_DEPTH
LONG_CONTAINER = 64  # a longer container is measured, not walked item by item
# C objects without a __dict__ that can hold user data (itertools.cycle saves every item).
_OPAQUE_MODULES = frozenset({"itertools", "functools", "collections", "builtins", "_collections"})
# What nn.Module.__init__ itself sets: torch's bookkeeping, walked through its own code.
_MODULE_INTERNALS = frozenset(vars(torch.nn.Module()).keys())
HOOK_TABLES = ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks",
               "_backward_pre_hooks", "_state_dict_hooks", "_state_dict_pre_hooks",
               "_load_state_dict_pre_hooks", "_load_state_dict_post_hooks")
_TENSOR_HOOK_TABLES = ("_backward_hooks", "_post_accumulate_grad_hooks")
_LRU = type(functools.lru_cache(maxsize=None)(lambda: None))
_BIG_DATASET_ATTR = 10_000
# Counting a graph costs ~1 us a node. Past the cap a holder is known to grow (the
# analysis judges the uncapped samples) and its graph is not walked again.
GRAPH_CAP = GRAPH_NODES_CAP
QUICK_GRAPH_LIMIT = 1_000  # quick re-measures skip graphs bigger than this (~1 ms to count)
_KEY_TYPES = (str, int, float, bool, type(None))


def _key_part(key: Any, index: int) -> str:
    """A dict key in a path; never ``repr`` of an arbitrary object (a tensor key's repr
    formats the whole tensor, and a user type's repr is user code)."""
    if type(key) is str and key.isidentifier():
        return f".{key}"
    if type(key) in _KEY_TYPES or (type(key) is tuple and len(key) <= 4 and all(
            type(k) in _KEY_TYPES for k in key)):
        return f"[{key!r:.40}]"
    return f"[<{type(key).__name__} #{index}>]"


# id(class) -> (weak reference to it, defined in the user's files): a class we held would
# keep its module's globals, and all they hold, alive past the program's own end.
_USER_CLASSES: dict[int, tuple[weakref.ref[type], bool]] = {}


def user_class(cls: type) -> bool:
    """A class defined in the user's own files."""
    key = id(cls)
    entry = _USER_CLASSES.get(key)
    if entry is not None and entry[0]() is cls:
        return entry[1]
    found = _defined_in_user_file(cls)
    try:
        ref = weakref.ref(cls, lambda _, key=key: _USER_CLASSES.pop(key, None))
    except TypeError:  # a class without weak references: asked each time
        return found
    _USER_CLASSES[key] = (ref, found)
    return found


def _defined_in_user_file(cls: type) -> bool:
    module = sys.modules.get(cls.__module__)
    return is_user_file(getattr(module, "__file__", "") or "")


def own_attributes(obj: Any) -> dict[str, Any]:
    """An object's own attributes (a module's without torch's bookkeeping)."""
    attrs = access.instance_dict(obj)
    if attrs is None:
        return access.slot_values(obj)
    skip = _MODULE_INTERNALS if access.is_a(obj, torch.nn.Module) else frozenset()
    return {k: v for k, v in list(attrs.items())
            if type(k) is str and k not in skip and not k.startswith("__")}


def _ours(obj: Any) -> bool:
    """torchleak's own objects (a ``torchleak.monitor()`` handle in the user's frame) are
    never holders: walking our buffers would report our own bookkeeping."""
    return str(type(obj).__module__).startswith("torchleak.")


def count_graph_nodes(grad_fn: Any, cap: int) -> tuple[int, int]:
    """Autograd nodes reachable from ``grad_fn`` (at most ``cap``), and the leaf nodes
    (parameters) among them."""
    stats = walk_graph([grad_fn], cap, with_saved=False, with_leaves=True)
    return stats.nodes, stats.leaves


MEMORY_ENTRIES = 4096  # routes, labels and graph sizes remembered between walks


class _Bounded(dict):  # type: ignore[type-arg]
    """A dict that forgets its oldest entries past ``MEMORY_ENTRIES``."""

    def remember(self, key: str, value: Any) -> None:
        self.pop(key, None)
        self[key] = value
        while len(self) > MEMORY_ENTRIES:
            del self[next(iter(self))]


class WalkMemory:
    """A walk's limits, and what the walker remembers between walks (all bounded)."""

    def __init__(self, max_objects: int = 8_000, graph_cap: int = GRAPH_CAP,
                 max_samples: int = 400) -> None:
        self.max_objects = max_objects
        self.graph_cap = graph_cap
        self.max_samples = max_samples
        self.capped_graphs: _Bounded = _Bounded()
        self.last_nodes: _Bounded = _Bounded()  # path -> autograd nodes at its last count
        self.routes: _Bounded = _Bounded()
        self.labels: _Bounded = _Bounded()
        self.recorded: _Bounded = _Bounded()  # paths measured non-empty: an emptied one is noted
        self.native: list[HolderSample] = []  # native handles seen by the last full walk

    def note_nodes(self, path: str, nodes: int) -> None:
        self.last_nodes.remember(path, nodes)
        if nodes >= self.graph_cap:
            self.capped_graphs.remember(path, True)


class Walk:
    def __init__(self, walker: WalkMemory) -> None:
        self.w = walker
        self.visited: set[int] = set()
        self.queue: collections.deque[tuple[Any, str, int]] = collections.deque()
        self.samples: list[HolderSample] = []
        self.seen_classes: set[type] = set()
        self.labels: dict[str, str] = {}
        # The model's own structure: what grows there is a growing model, not a history.
        self.model_parts: dict[str, str] = {}
        self.routes: dict[str, Route] = {}
        self.sample_routes: dict[str, Route] = {}
        self.native: list[HolderSample] = []
        # Containers held by a library object, and user objects named by their class.
        self.library_held: set[str] = set()
        self.rerooted: dict[str, int] = {}

    def enqueue(self, obj: Any, path: str, depth: int, label: str | None = None,
                route: Route | None = None) -> None:
        """``label``: how a person names it, e.g. ``Trainer.outputs`` for ``fit().t.outputs``;
        ``route``: how to find it again without holding it (see ``resolve``)."""
        if label is not None:
            self.labels[path] = label
        if route is not None:
            self.routes.setdefault(path, route)
        if depth <= MAX_DEPTH and (not access.is_a(obj, _SKIP) or access.is_a(obj, type)) and (
                not _ours(obj)):
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
        self.queue.clear()  # what was not reached is not kept either

    def _route(self, path: str, step: tuple[Any, ...]) -> Route | None:
        parent = self.routes.get(path)
        return None if parent is None else parent + (step,)

    def record(self, sample: HolderSample, route: Route | None = None) -> None:
        route = route or sample.route or self.routes.get(sample.holder)
        if route is not None:
            self.sample_routes[sample.holder] = route
        label = self.labels.get(sample.holder)
        if label is not None:
            sample.detail.setdefault("label", label)
        part = self.model_parts.get(sample.holder)
        if part is not None:
            sample.detail.setdefault("model_part", part)
        if len(self.samples) < self.w.max_samples:
            self.samples.append(sample)

    def measure(self, obj: Any, path: str) -> None:
        """One known holder again, by kind (used by ``HolderWalker.remeasure``)."""
        if path.startswith("lru_cache "):
            self.cache(obj, path)
        elif path.endswith("._modules") and access.is_a(obj, torch.nn.Module):
            self.submodules(obj, path[: -len("._modules")])
        elif path.endswith(".__dict__"):
            self.attribute_set(own_attributes(obj), path[: -len(".__dict__")],
                               type(obj).__name__)
        elif access.is_a(obj, torch.nn.Module):
            self.module_hooks(obj, path.rsplit(".", 1)[0])
        elif access.is_a(obj, torch.Tensor):
            if obj.grad_fn is not None and self.w.last_nodes.get(path, 0) >= QUICK_GRAPH_LIMIT:
                return  # a big graph is counted by full walks only: quick must stay quick
            self.tensor(obj, path)
        elif access.container_base(obj) is not None:
            self.container(obj, path, depth=MAX_DEPTH)
        elif access.is_a(obj, _BUFFERS) or type(obj).__module__ == "numpy":
            self.visit(obj, path, MAX_DEPTH)

    def visit(self, obj: Any, path: str, depth: int) -> None:
        kind = type(obj)
        if issubclass(kind, torch.Tensor):
            self.tensor(obj, path)
        elif access.container_base(obj) is not None:
            self.container(obj, path, depth)
        elif issubclass(kind, _BUFFERS):
            self.buffer(obj, path)
        elif issubclass(kind, type):
            self.user_class(obj, path, depth)
        elif kind is _LRU:
            self.cache(obj, path)
        elif issubclass(kind, torch.nn.Module):
            self.module(obj, path, depth)
        elif issubclass(kind, DataLoader):
            self.dataloader(obj, path, depth)
        elif kind is MethodType:
            # A bound method (an event handler, a callback) keeps its object alive.
            owner = obj.__self__
            self.enqueue(owner, f"{path}.__self__", depth + 1, type(owner).__name__,
                         self._route(path, ("attr", "__self__")))
        elif kind is FunctionType:
            self.closure(obj, path, depth)
        elif kind is GeneratorType:
            self.generator(obj, path, depth)
        elif kind.__module__ == "numpy":
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
        for var, value in access.frame_locals(frame).items():
            self.enqueue(value, f"{path}.<{name}>.{var}", depth + 1,
                         f"local {var} of generator {name}()")

    def buffer(self, obj: Any, path: str) -> None:
        """One object whose own size grows: a bytearray extended in place, a string or
        bytes rebound to a longer one, an in-memory file."""
        size = access.sizeof(obj)
        if access.is_a(obj, io.StringIO):
            # Its size leaves out the text it holds: the write position is its length in
            # characters for a log only written to (at least a byte each).
            try:
                size += int(io.StringIO.tell(obj))
            except (ValueError, OSError):  # closed
                return
        if size < MIN_BUFFER_BYTES:
            return
        self.record(HolderSample(path, "buffer", type(obj).__name__, size, size,
                                 detail={"item_type": "bytes"}))

    def array(self, arr: Any, path: str) -> None:
        """numpy arrays are measured like tensors (a feature bank grown by concatenate)."""
        import numpy as np

        if not issubclass(type(arr), np.ndarray):
            return
        size, nbytes = np.ndarray.size.__get__(arr), np.ndarray.nbytes.__get__(arr)
        if size < 4096:
            return
        shape = np.ndarray.shape.__get__(arr)
        self.record(HolderSample(path, "tensor", f"numpy.{type(arr).__name__}", int(size),
                                 int(nbytes), 1, int(nbytes), 0, None,
                                 {"shape": list(shape), "dtype": str(arr.dtype),
                                  "device": "cpu"}))

    def tensor(self, t: torch.Tensor, path: str) -> None:
        self.tensor_hooks(t, path)
        if issubclass(type(t), torch.nn.Parameter):
            return
        has_graph = t.grad_fn is not None
        if not has_graph and t.numel() < 4096:
            return
        fp = tensor_footprint(t)
        nodes = None
        detail: dict[str, Any] = {"shape": list(t.shape), "dtype": str(t.dtype),
                                  "device": str(t.device)}
        if has_graph:
            if path in self.w.capped_graphs:
                nodes = self.w.graph_cap
            else:
                nodes, detail["graph_leaves"] = count_graph_nodes(t.grad_fn, self.w.graph_cap)
                self.w.note_nodes(path, nodes)
        self.record(HolderSample(path, "tensor", type(t).__name__, int(t.numel()), int(fp.bytes),
                                 1, int(fp.tensor_bytes), int(has_graph), nodes, detail))

    def container(self, obj: Any, path: str, depth: int) -> None:
        size = access.length(obj)
        base = access.container_base(obj)
        if not size and path in self.w.recorded:
            # Emptied since a walk measured it (a .clear(), an attach clear): released,
            # and the analysis must see it drop, not miss it.
            self.record(HolderSample(path, "container", type(obj).__name__, 0, 0, 0, 0, 0,
                                     None, {}))
        if size and (size >= LONG_CONTAINER or base is not tuple):  # short tuples cannot grow
            fp = container_footprint(obj)
            detail: dict[str, Any] = {}
            if base is collections.deque and obj.maxlen is not None:
                detail["maxlen"] = obj.maxlen
            items = sample_items(obj, 1)
            if items:
                detail["item_type"] = type(items[0]).__name__
            if fp.device is not None:
                detail["device"] = fp.device
            self.record(HolderSample(path, "container", type(obj).__name__, size, int(fp.bytes),
                                     int(fp.tensors), int(fp.tensor_bytes),
                                     int(fp.grad_fn_tensors), None, detail))
        if size > LONG_CONTAINER or depth >= MAX_DEPTH:
            return  # a long container is measured, not walked
        parent = self.labels.get(path)
        named = parent if parent and not parent.startswith(("local ", "global ", "thread ")) else None
        held = path in self.library_held
        if base is dict:
            for i, (key, value) in enumerate(access.dict_items(obj)):
                part = _key_part(key, i)
                # Never keep a reference to an object key (a Parameter): plain keys only.
                step = ("key", key) if type(key) in _KEY_TYPES else None
                child = self.reroot(value, path + part) if held else path + part
                self.enqueue(value, child, depth + 1, named + part if named else None,
                             self._route(path, step) if step else None)
        else:
            for i, value in enumerate(list(access.values(obj))):
                if not issubclass(type(value), torch.Tensor):  # elements are in the footprint
                    route = self._route(path, ("index", i)) if base in (list, tuple) else None
                    child = self.reroot(value, f"{path}[{i}]") if held else f"{path}[{i}]"
                    self.enqueue(value, child, depth + 1, None, route)

    def module(self, mod: torch.nn.Module, path: str, depth: int) -> None:
        self.module_hooks(mod, path)
        self.submodules(mod, path)
        attrs = access.instance_dict(mod) or {}
        for name, child in list((attrs.get("_modules") or {}).items()):
            if child is not None:
                self.enqueue(child, f"{path}.{name}", depth + 1, None,
                             self._route(path, ("child", name)))
        for name, param in list((attrs.get("_parameters") or {}).items()):
            if param is not None:
                self.tensor_hooks(param, f"{path}.{name}")
        owner = type(mod).__name__
        for name, buf in list((attrs.get("_buffers") or {}).items()):
            # A buffer rebound to a bigger tensor every step (a queue grown by torch.cat)
            # grows like an attribute; the fixed ones are flat.
            if buf is not None:
                self.enqueue(buf, f"{path}.{name}", depth + 1, f"{owner}.{name}",
                             self._route(path, ("buffer", name)))
        own = own_attributes(mod)
        self.attribute_set(own, path, owner)
        for name, value in own.items():
            self.enqueue(value, f"{path}.{name}", depth + 1, f"{owner}.{name}",
                         self._route(path, ("attr", name)))
        self.user_class(type(mod), type(mod).__name__, depth + 1)

    def module_hooks(self, mod: torch.nn.Module, path: str) -> None:
        attrs = access.instance_dict(mod) or {}
        hooks: list[Any] = []
        for table in HOOK_TABLES:
            found = attrs.get(table)
            if type(found) in (dict, collections.OrderedDict) and found:
                hooks.extend(dict.values(found))
        if hooks:
            table = "_forward_hooks" if attrs.get("_forward_hooks") else "hooks"
            sample = hooks_sample(f"{path}.{table}", hooks, type(mod).__name__)
            sample.detail["label"] = f"{type(mod).__name__}.{table}"
            self.record(sample, self.routes.get(path))

    def tensor_hooks(self, t: torch.Tensor, path: str) -> None:
        """``tensor.register_hook`` every step: hooks pile up in ``_backward_hooks``."""
        for table in _TENSOR_HOOK_TABLES:
            hooks = getattr(t, table, None)
            if type(hooks) in (dict, collections.OrderedDict) and hooks:
                sample = hooks_sample(f"{path}.{table}", list(dict.values(hooks)),
                                      type(t).__name__)
                sample.detail["label"] = f"{path.rsplit('.', 1)[-1]}.{table} (tensor hooks)"
                self.record(sample, self.routes.get(path))

    def submodules(self, mod: torch.nn.Module, path: str) -> None:
        """A module that gains children (a ModuleDict of adapters, a growing ModuleList):
        the count of its children and the bytes of their own parameters."""
        children = [c for c in dict.values((access.instance_dict(mod) or {}).get("_modules")
                                          or {}) if c is not None]
        if len(children) < 2:
            return
        nbytes = count = 0
        for child in children:
            params = (access.instance_dict(child) or {}).get("_parameters") or {}
            found = [p for p in dict.values(params) if p is not None]
            count += len(found)
            nbytes += sum(p.numel() * p.element_size() for p in found)
        self.labels.setdefault(f"{path}._modules", f"{type(mod).__name__}._modules (submodules)")
        self.model_parts[f"{path}._modules"] = "submodules"
        self.record(HolderSample(f"{path}._modules", "container", type(mod).__name__,
                                 len(children), int(nbytes), count, int(nbytes),
                                 detail={"item_type": "Module"}),
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
        kind = type(obj)
        if issubclass(kind, torch.optim.Optimizer):
            self.optimizer(obj, path)
            return
        if kind.__module__ == "ctypes" or (kind.__module__ or "").startswith("ctypes."):
            self.native_handle(obj, path)
            return
        if depth >= LIBRARY_DEPTH and not user_class(kind):
            return  # deep inside a library object (a logging.Logger's registry of all loggers)
        attrs = own_attributes(obj)
        if not attrs:
            self.opaque(obj, path, depth)
            return
        owner = kind.__name__
        library = not user_class(kind)
        self.attribute_set(attrs, path, owner)
        for name, value in attrs.items():
            child = f"{path}.{name}"
            self.enqueue(value, self.reroot(value, child) if library else child, depth + 1,
                         f"{owner}.{name}", self._route(path, ("attr", name)))
        self.user_class(kind, kind.__name__, depth + 1)

    def reroot(self, value: Any, path: str) -> str:
        """The path of an object a library object holds: the user's own object (a
        LightningModule inside a Trainer, a callback in a Trainer's handler) is named by
        its class, as a person names it, not by the framework's internals that lead to it.
        Containers keep the path and pass the rule on to their items."""
        kind = type(value)
        if access.container_base(value) is not None:
            self.library_held.add(path)
            return path
        if issubclass(kind, (type, torch.Tensor)) or not user_class(kind):
            return path
        name = kind.__name__
        if name in self.routes and name not in self.rerooted:
            return path  # a root of that name (a frame's ``self``) is another object
        if self.rerooted.setdefault(name, id(value)) != id(value):
            return path  # two objects of one class: the second keeps its full path
        return name

    def native_handle(self, obj: Any, path: str) -> None:
        """A handle on native code (a ctypes library, a C object): what memory outside
        Python may hang on, named as evidence, never as a holder."""
        name = access.attribute(obj, "_name")
        self.native.append(HolderSample(path, "native", type(obj).__name__, 0, detail={
            "library": name if isinstance(name, str) else None,
            "label": self.labels.get(path, path)}))

    def optimizer(self, opt: torch.optim.Optimizer, path: str) -> None:
        """Its param groups and state, measured, not walked: state fills once on the first
        step; groups and state that keep growing are a leak."""
        owner = type(opt).__name__
        for name in ("param_groups", "state"):
            value = access.attribute(opt, name)
            if access.container_base(value) in (list, dict):
                self.labels[f"{path}.{name}"] = f"{owner}.{name}"
                self.model_parts[f"{path}.{name}"] = "optimizer"
                route = self._route(path, ("attr", name))
                if route is not None:
                    self.routes.setdefault(f"{path}.{name}", route)
                self.container(value, f"{path}.{name}", depth=MAX_DEPTH)

    def opaque(self, obj: Any, path: str, depth: int) -> None:
        """C objects with no __dict__ (itertools.cycle, functools.partial): what they hold."""
        if type(obj).__module__ not in _OPAQUE_MODULES:
            return
        for i, ref in enumerate(gc.get_referents(obj)):
            if not issubclass(type(ref), type):
                self.enqueue(ref, f"{path}.<{type(obj).__name__}[{i}]>", depth + 1)

    def user_class(self, cls: type, path: str, depth: int) -> None:
        """Class-level caches and registries (lru_cache on methods, class lists)."""
        if cls in self.seen_classes or not user_class(cls):
            return
        self.seen_classes.add(cls)
        for name, value in list(vars(cls).items()):
            if type(value) in (staticmethod, classmethod):
                value = value.__func__
            if type(value) is _LRU or (access.container_base(value) is not None
                                       and not name.startswith("__")):
                self.enqueue(value, f"{cls.__name__}.{name}", depth)

    def cache(self, fn: Any, path: str) -> None:
        info = fn.cache_info()
        if info.currsize == 0:
            return
        name = getattr(fn, "__qualname__", path)
        holder = path if path.startswith("lru_cache ") else f"lru_cache {name}()"
        self.record(HolderSample(holder, "cache", "lru_cache", info.currsize,
                                 route=self.routes.get(path),
                                 detail={"maxsize": info.maxsize, "function": name,
                                         "path": path, "hits": info.hits,
                                         "misses": info.misses}))

    def dataloader(self, loader: DataLoader, path: str, depth: int) -> None:
        attrs = access.instance_dict(loader) or {}
        dataset = attrs.get("dataset")
        big, small = {}, {}
        for name, value in own_attributes(dataset).items() if dataset is not None else ():
            base = access.container_base(value)
            if base is None:
                continue
            if access.length(value) >= _BIG_DATASET_ATTR:
                items = sample_items(value, 1)
                big[name] = {"type": type(value).__name__, "length": access.length(value),
                             "item_type": type(items[0]).__name__ if items else None,
                             "bytes": int(container_footprint(value).bytes)}
            elif base not in (tuple, frozenset) and len(small) < 8:
                # Small here, but each worker fills its own copy (a cache in __getitem__).
                small[name] = {"type": type(value).__name__, "length": access.length(value)}
        workers = attrs.get("num_workers")
        self.record(HolderSample(f"{path} (DataLoader)", "dataloader", type(dataset).__name__,
                                 int(workers) if type(workers) is int else 0,
                                 detail={"dataset": type(dataset).__name__,
                                         "num_workers": workers,
                                         "persistent_workers": attrs.get("persistent_workers"),
                                         "big_attributes": big,
                                         "small_containers": small}))
        if dataset is not None:
            self.enqueue(dataset, f"{path}.dataset", depth + 1, None,
                         self._route(path, ("attr", "dataset")))
