"""Facts about containers: does it outlive the step, is it bounded, is it reset?"""

from __future__ import annotations

import ast

from torchleak.check.astutil import dotted, keyword, root_name, target_key, walk_local
from torchleak.check.attr_growth import growth
from torchleak.check.context import Ctx, Loop
from torchleak.check.rules.base import Analysis
from torchleak.check.roles import in_evaluation, runs_per_step

_RESET_METHODS = {"clear", "pop", "popleft", "popitem", "reset"}


def assigned_values(a: Analysis, key: str) -> list[ast.AST]:
    """Every value assigned to ``key`` (``name`` or ``self.attr``) anywhere in the file."""
    cache: dict[str, list[ast.AST]] | None = getattr(a, "_assigned", None)
    if cache is None:
        cache = {}
        for node, _ctx in a.index.assigns:
            if node.value is None:
                continue
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                k = dotted(t)
                if k:
                    cache.setdefault(k, []).append(node.value)
        a._assigned = cache  # type: ignore[attr-defined]
    return cache.get(key, [])


def is_bounded_deque(a: Analysis, key: str) -> bool:
    for value in assigned_values(a, key):
        if isinstance(value, ast.Call) and dotted(value.func).endswith("deque"):
            if keyword(value, "maxlen") is not None or len(value.args) >= 2:
                return True
    return False


def reset_in(loop: Loop, key: str) -> bool:
    """Is ``key`` re-created or cleared inside the loop body (once per iteration)?"""
    return key in _reset_keys(loop)


_RESET_CACHE: dict[int, tuple[Loop, frozenset[str]]] = {}


def _reset_keys(loop: Loop) -> frozenset[str]:
    cached = _RESET_CACHE.get(id(loop))
    if cached is not None and cached[0] is loop:
        return cached[1]
    if len(_RESET_CACHE) > 4096:
        _RESET_CACHE.clear()
    keys = frozenset(_collect_resets(loop))
    _RESET_CACHE[id(loop)] = (loop, keys)
    return keys


def _collect_resets(loop: Loop) -> set[str]:
    found: set[str] = set()
    for node in walk_local(loop):
        if isinstance(node, ast.Assign):
            used = {dotted(n) for n in ast.walk(node.value)
                    if isinstance(n, (ast.Name, ast.Attribute))}
            for t in node.targets:
                elts = t.elts if isinstance(t, (ast.Tuple, ast.List)) else [t]
                # ``x = x + v`` / ``x = torch.cat([x, v])`` grows ``x``, it does not reset it;
                # ``x[k] = v`` stores into ``x``
                found.update(k for e in elts if not isinstance(e, ast.Subscript)
                             and (k := target_key(e)) and k not in used)
        elif isinstance(node, ast.AnnAssign):
            found.add(target_key(node.target))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr in _RESET_METHODS:
                found.add(target_key(node.func.value))
        elif isinstance(node, ast.Delete):
            found.update(target_key(t) for t in node.targets)
    return found


def outlives_step(a: Analysis, container: ast.AST, ctx: Ctx) -> bool | None:
    """True when the container survives the current step; None when the context is
    unknown (module-level code of an excerpt, or a loop that is not a step loop)."""
    key = target_key(container)
    root = root_name(container)
    if not key or not root:
        return False
    loop = a.index.innermost_step_loop(ctx)
    if loop is not None:
        return not reset_in(loop, key)
    if runs_per_step(a.index, ctx.func):
        if root == "self":
            return True
        return root not in a.taint.facts(ctx.func).defs and not _is_param(ctx.func, root)
    if ctx.loops and in_evaluation(a.index, ctx):
        return not reset_in(ctx.loops[-1], key)  # grows over the evaluation loop
    return None


def _is_param(func: ast.AST | None, name: str) -> bool:
    args = getattr(func, "args", None)
    if args is None:
        return False
    every = args.posonlyargs + args.args + args.kwonlyargs
    every += [x for x in (args.vararg, args.kwarg) if x is not None]
    return any(x.arg == name for x in every)


def used_as_tensor_batch(a: Analysis, key: str) -> bool:
    """The list is later stacked/concatenated or used with tensor methods: keep tensors."""
    stacked = a.index.cache.get("stacked")
    if stacked is None:
        stacked = set()
        for call, _ctx in a.index.calls:
            name = dotted(call.func)
            if name.endswith(("stack", "cat", "concat", "concatenate", "vstack", "hstack")):
                stacked.update(target_key(arg) for arg in call.args)
        a.index.cache["stacked"] = stacked
    return key in stacked  # type: ignore[operator]


Kind = str  # "list" (grows), "bounded", "unknown"
_GROWABLE_CALLS = {"list", "dict", "defaultdict", "OrderedDict", "deque"}


def attr_kind(a: Analysis, cls: ast.ClassDef | None, attr: str, method: str) -> Kind:
    """What ``self.<attr>.<method>(...)`` grows inside ``cls``: a plain list (or dict of
    lists), something bounded, or an object whose behaviour is unknown. User classes of the
    same module are followed: a ``ReplayBuffer`` wrapping ``deque(maxlen=...)`` is bounded."""
    if cls is None:
        return "list"
    values = class_attr_values(a, cls, attr)
    if not values:
        return "list" if _stands_alone(cls) else "unknown"
    kinds = {_value_kind(a, cls, v, method) for v in values}
    if "bounded" in kinds:
        return "bounded"
    return "list" if kinds == {"list"} else "unknown"


def _value_kind(a: Analysis, cls: ast.ClassDef, value: ast.AST, method: str) -> Kind:
    if isinstance(value, (ast.List, ast.ListComp, ast.Dict, ast.DictComp)):
        return "list"
    if isinstance(value, ast.Call):
        name = dotted(value.func).split(".")[-1]
        if name == "deque":
            return "bounded" if keyword(value, "maxlen") is not None or len(value.args) >= 2 \
                else "list"
        if name in _GROWABLE_CALLS:
            return "list"
        wrapper = module_class(a, name)
        return _wrapper_kind(a, wrapper, method) if wrapper is not None else "unknown"
    if isinstance(value, ast.Name):
        # ``self.buffer = buffer``: borrowed from a parameter; follow its annotation
        wrapper = module_class(a, _annotation_of(cls, value.id))
        return _wrapper_kind(a, wrapper, method) if wrapper is not None else "unknown"
    return "unknown"


def _wrapper_kind(a: Analysis, wrapper: ast.ClassDef, method: str) -> Kind:
    """A user class: bounded when the method it grows through appends to a bounded
    container or the class trims what it grows."""

    func = next((f for f in wrapper.body if isinstance(f, ast.FunctionDef)
                 and f.name == method), None)
    if func is None:
        return "unknown"
    g = growth(a)
    kinds: set[Kind] = set()
    for call, ctx in g.appends_in(func):
        attr = call.func.value.attr if isinstance(call.func, ast.Attribute) \
            and isinstance(call.func.value, ast.Attribute) else ""
        if not attr:
            continue
        if g.is_bounded(attr, ctx):
            kinds.add("bounded")
        else:
            kinds.add(attr_kind(a, wrapper, attr, call.func.attr) if wrapper is not None
                      else "unknown")
    if not kinds:
        return "unknown"
    return "list" if kinds == {"list"} else ("bounded" if "bounded" in kinds else "unknown")


def class_attr_values(a: Analysis, cls: ast.ClassDef, attr: str) -> list[ast.AST]:
    by_class = a.index.cache.get("attr_values")
    if not isinstance(by_class, dict):
        by_class = {}
        for node, ctx in a.index.assigns:
            if ctx.cls is None or node.value is None:
                continue
            values = by_class.setdefault(id(ctx.cls), {})
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                if isinstance(t, ast.Attribute) and dotted(t.value) == "self":
                    values.setdefault(t.attr, []).append(node.value)
                elif isinstance(t, ast.Name) and ctx.func is None:
                    values.setdefault(t.id, []).append(node.value)  # class attribute
        a.index.cache["attr_values"] = by_class
    return by_class.get(id(cls), {}).get(attr, [])


def module_class(a: Analysis, name: str) -> ast.ClassDef | None:
    if not name:
        return None
    return next((c for c in a.index.classes if c.name == name), None)


def _annotation_of(cls: ast.ClassDef, param: str) -> str:
    init = next((f for f in cls.body if isinstance(f, ast.FunctionDef)
                 and f.name == "__init__"), None)
    if init is None:
        return ""
    for arg in init.args.args + init.args.kwonlyargs:
        if arg.arg == param and arg.annotation is not None:
            node = arg.annotation
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                return node.value.split(".")[-1].strip()
            return dotted(node).split(".")[-1]
    return ""


def _stands_alone(cls: ast.ClassDef) -> bool:
    """No base class that could create the attribute (``object`` or none)."""
    return all(dotted(b) in ("object", "") for b in cls.bases) or not cls.bases
