"""Facts about containers: does it outlive the step, is it bounded, is it reset?"""

from __future__ import annotations

import ast

from torchleak.check.astutil import dotted, keyword, root_name, target_key, walk_local
from torchleak.check.context import Ctx, Loop
from torchleak.check.rules.base import Analysis
from torchleak.check.steps import is_step_function

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
                # ``x = x + v`` / ``x = torch.cat([x, v])`` grows ``x``, it does not reset it
                found.update(k for e in elts if (k := target_key(e)) and k not in used)
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
    if is_step_function(ctx.func):
        if root == "self":
            return True
        return root not in a.taint.facts(ctx.func).defs and not _is_param(ctx.func, root)
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
