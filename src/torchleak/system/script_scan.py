"""Read a training script's DataLoader settings and Dataset storage with ``ast`` (never
run it): what ``doctor`` compares with the machine.

Values are resolved as far as the source allows: literals, names bound to literals,
``min``/``max``/arithmetic of those, and ``args.NAME`` from an argparse ``default=``.
Anything else is reported as unknown with its source text.
"""

from __future__ import annotations

import ast
import sys
from dataclasses import dataclass, field
from typing import Any

LOADER_ARGS = ("dataset", "batch_size", "shuffle", "sampler", "batch_sampler", "num_workers",
               "collate_fn", "pin_memory")  # DataLoader's positional order
LOADER_DEFAULTS: dict[str, Any] = {"batch_size": 1, "num_workers": 0, "pin_memory": False,
                                   "persistent_workers": False, "prefetch_factor": None}
WATCHED = tuple(LOADER_DEFAULTS)
_UNKNOWN = object()
# A Python object per value in a dict: an int or float object plus its slot.
_VALUE_BYTES = 40
# An item's own object (a dict, tuple or list header) in its allocator size class.
_HEADER_BYTES = 64


@dataclass(frozen=True)
class Setting:
    value: Any  # the resolved value; None with known=False when it cannot be read
    text: str  # as written ("" when not passed: DataLoader's default applies)
    known: bool


@dataclass(frozen=True)
class LoaderCall:
    line: int
    settings: dict[str, Setting]
    dataset_class: str | None  # the Dataset class passed, when the source says

    def value(self, name: str) -> Any:
        """The setting's value (DataLoader's default when not passed; None when unknown)."""
        setting = self.settings.get(name)
        if setting is None:
            return LOADER_DEFAULTS[name]
        return setting.value if setting.known else None

    def to_dict(self) -> dict[str, Any]:
        return {"line": self.line, "dataset_class": self.dataset_class,
                "settings": {k: (s.value if s.known else None) for k, s in
                             self.settings.items()},
                "source": {k: s.text for k, s in self.settings.items()}}


@dataclass(frozen=True)
class ObjectStore:
    """A Dataset attribute holding Python objects (copied page by page into workers)."""

    class_name: str
    attr: str
    line: int
    kind: str  # "list of dicts", "dict", "list", "list of tuples", "loaded from a file"
    items: int | None
    estimated_bytes: int | None  # the objects' whole size, estimated
    fields: tuple[str, ...] = ()  # the keys of a list of dicts, when written as literals

    @property
    def touched_bytes(self) -> int | None:
        """The least a worker copies by reading every item once: the pages holding the
        items' own objects, whose reference counts it writes (~64 bytes an item)."""
        return None if self.items is None else self.items * _HEADER_BYTES

    def to_dict(self) -> dict[str, Any]:
        return {**self.__dict__, "fields": list(self.fields),
                "touched_bytes": self.touched_bytes}


@dataclass
class ScriptFacts:
    path: str
    loaders: list[LoaderCall] = field(default_factory=list)
    stores: list[ObjectStore] = field(default_factory=list)
    uses_mixed_precision: bool = False
    syntax_error: str | None = None
    classes: set[str] = field(default_factory=set, repr=False)  # defined in the script

    def stores_of(self, class_name: str | None) -> list[ObjectStore]:
        """The stores of a loader's dataset class when the script defines it; all of the
        script's stores when the class is unknown or a wrapper (Subset, ConcatDataset)."""
        if class_name in self.classes:
            return [s for s in self.stores if s.class_name == class_name]
        return list(self.stores)

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "loaders": [c.to_dict() for c in self.loaders],
                "stores": [s.to_dict() for s in self.stores],
                "uses_mixed_precision": self.uses_mixed_precision,
                "syntax_error": self.syntax_error}


class _Resolver:
    """Constant values of names and argparse defaults in one module."""

    def __init__(self, tree: ast.Module) -> None:
        self.names: dict[str, ast.expr] = {}
        self.arg_defaults: dict[str, ast.expr] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(
                    node.targets[0], ast.Name):
                self.names[node.targets[0].id] = node.value
            elif isinstance(node, ast.Call) and _call_name(node) == "add_argument":
                self._argparse_default(node)

    def _argparse_default(self, call: ast.Call) -> None:
        flags = [a.value for a in call.args if isinstance(a, ast.Constant)
                 and isinstance(a.value, str)]
        default = next((k.value for k in call.keywords if k.arg == "default"), None)
        dest = next((k.value for k in call.keywords if k.arg == "dest"), None)
        if default is None or not flags:
            return
        name = dest.value if isinstance(dest, ast.Constant) else flags[-1].lstrip("-")
        self.arg_defaults[str(name).replace("-", "_")] = default

    def value(self, node: ast.expr, depth: int = 0) -> Any:
        if depth > 8:
            return _UNKNOWN
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.Name):
            bound = self.names.get(node.id)
            return _UNKNOWN if bound is None else self.value(bound, depth + 1)
        if isinstance(node, ast.Attribute) and node.attr in self.arg_defaults:
            return self.value(self.arg_defaults[node.attr], depth + 1)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            inner = self.value(node.operand, depth + 1)
            return -inner if isinstance(inner, (int, float)) else _UNKNOWN
        if isinstance(node, ast.BinOp):
            return _arith(node.op, self.value(node.left, depth + 1),
                          self.value(node.right, depth + 1))
        if isinstance(node, ast.Call) and _call_name(node) in ("min", "max", "int"):
            args = [self.value(a, depth + 1) for a in node.args]
            if node.keywords or not args or any(a is _UNKNOWN for a in args):
                return _UNKNOWN
            fn = {"min": min, "max": max, "int": int}[_call_name(node)]
            try:
                return fn(*args)
            except (TypeError, ValueError):
                return _UNKNOWN
        return _UNKNOWN


def _arith(op: ast.operator, left: Any, right: Any) -> Any:
    if not (isinstance(left, (int, float)) and isinstance(right, (int, float))):
        return _UNKNOWN
    ops = {ast.Add: lambda: left + right, ast.Sub: lambda: left - right,
           ast.Mult: lambda: left * right, ast.FloorDiv: lambda: left // right if right else
           _UNKNOWN, ast.Pow: lambda: left ** right if abs(right) < 64 else _UNKNOWN}
    fn = ops.get(type(op))
    return fn() if fn is not None else _UNKNOWN


def _call_name(call: ast.Call) -> str:
    func = call.func
    if isinstance(func, ast.Name):
        return func.id
    return func.attr if isinstance(func, ast.Attribute) else ""


def _setting(resolver: _Resolver, node: ast.expr) -> Setting:
    value = resolver.value(node)
    known = value is not _UNKNOWN
    return Setting(value if known else None, ast.unparse(node), known)


def _dataset_class(resolver: _Resolver, node: ast.expr | None) -> str | None:
    if isinstance(node, ast.Name):
        node = resolver.names.get(node.id)
    return _call_name(node) or None if isinstance(node, ast.Call) else None


def _loader(resolver: _Resolver, call: ast.Call) -> LoaderCall:
    passed: dict[str, ast.expr] = dict(zip(LOADER_ARGS, call.args))
    passed.update({k.arg: k.value for k in call.keywords if k.arg})
    settings = {name: _setting(resolver, passed[name]) for name in WATCHED if name in passed}
    return LoaderCall(call.lineno, settings, _dataset_class(resolver, passed.get("dataset")))


def _range_length(resolver: _Resolver, comp: ast.comprehension) -> int | None:
    it = comp.iter
    if isinstance(it, ast.Call) and _call_name(it) == "range" and 1 <= len(it.args) <= 2:
        bounds = [resolver.value(a) for a in it.args]
        if all(isinstance(b, int) for b in bounds):
            return max(0, bounds[-1] - (bounds[0] if len(bounds) == 2 else 0))
    return None


def _element_bytes(element: ast.expr) -> int:
    """A rough size of one element built by ``element``."""
    if isinstance(element, ast.Dict):
        return sys.getsizeof(dict.fromkeys(range(len(element.keys)))) + _VALUE_BYTES * len(
            element.keys)
    if isinstance(element, (ast.Tuple, ast.List)):
        return sys.getsizeof(tuple(range(len(element.elts)))) + _VALUE_BYTES * len(
            element.elts)
    return _VALUE_BYTES + 24


def _store_kind(resolver: _Resolver, value: ast.expr) -> tuple[str, int | None, int] | None:
    """(kind, items, bytes per item) when ``value`` builds Python objects."""
    if isinstance(value, (ast.ListComp, ast.DictComp)):
        element = value.elt if isinstance(value, ast.ListComp) else value.value
        kind = {ast.Dict: "list of dicts", ast.Tuple: "list of tuples",
                ast.List: "list of lists"}.get(type(element), "list")
        if isinstance(value, ast.DictComp):
            kind = "dict"
        items = _range_length(resolver, value.generators[0])
        return kind, items, _element_bytes(element) + 8
    if isinstance(value, ast.List) and value.elts and all(
            isinstance(e, ast.Dict) for e in value.elts):
        return "list of dicts", len(value.elts), _element_bytes(value.elts[0]) + 8
    if isinstance(value, ast.Call) and _call_name(value) in ("load", "loads", "readlines"):
        return "loaded from a file", None, 0
    return None


def _dict_fields(value: ast.expr) -> tuple[str, ...]:
    element = value.elt if isinstance(value, ast.ListComp) else (
        value.elts[0] if isinstance(value, ast.List) and value.elts else None)
    if not isinstance(element, ast.Dict):
        return ()
    keys = [k.value for k in element.keys if isinstance(k, ast.Constant)]
    return tuple(str(k) for k in keys) if len(keys) == len(element.keys) else ()


def _init_stores(resolver: _Resolver, cls: ast.ClassDef) -> list[ObjectStore]:
    init = next((n for n in cls.body if isinstance(n, ast.FunctionDef)
                 and n.name == "__init__"), None)
    stores = []
    for node in ast.walk(init) if init is not None else ():
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1):
            continue
        target = node.targets[0]
        if not (isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name)
                and target.value.id == "self"):
            continue
        found = _store_kind(resolver, node.value)
        if found is not None:
            kind, items, per_item = found
            size = items * per_item + 56 + 8 * items if items is not None and per_item else None
            stores.append(ObjectStore(cls.name, target.attr, node.lineno, kind, items, size,
                                      _dict_fields(node.value)))
    return stores


def _is_dataset(cls: ast.ClassDef) -> bool:
    bases = [ast.unparse(b) for b in cls.bases]
    return any(b.endswith("Dataset") for b in bases) or any(
        isinstance(n, ast.FunctionDef) and n.name == "__getitem__" for n in cls.body)


def _mixed_precision(source: str) -> bool:
    return any(word in source for word in ("autocast", "GradScaler", "precision=16",
                                           'precision="16', 'precision="bf16', "bf16=True",
                                           "fp16=True"))


def scan_script(source: str, path: str) -> ScriptFacts:
    facts = ScriptFacts(path)
    try:
        tree = ast.parse(source, filename=path)
    except SyntaxError as err:
        facts.syntax_error = f"line {err.lineno}: {err.msg}"
        return facts
    resolver = _Resolver(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and _call_name(node) == "DataLoader":
            facts.loaders.append(_loader(resolver, node))
        elif isinstance(node, ast.ClassDef):
            facts.classes.add(node.name)
            if _is_dataset(node):
                facts.stores.extend(_init_stores(resolver, node))
    facts.loaders.sort(key=lambda c: c.line)
    facts.uses_mixed_precision = _mixed_precision(source)
    return facts
