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
    for node in walk_local(loop):
        if isinstance(node, ast.Assign):
            if any(dotted(n) == key for n in ast.walk(node.value)):
                continue  # ``x = x + v`` / ``x = torch.cat([x, v])`` grows, not resets
            for t in node.targets:
                elts = t.elts if isinstance(t, (ast.Tuple, ast.List)) else [t]
                if any(target_key(e) == key for e in elts):
                    return True
        elif isinstance(node, ast.AnnAssign) and target_key(node.target) == key:
            return True
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr in _RESET_METHODS and target_key(node.func.value) == key:
                return True
        elif isinstance(node, ast.Delete):
            if any(target_key(t) == key for t in node.targets):
                return True
    return False


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
    for call, _ctx in a.index.calls:
        name = dotted(call.func)
        if name.endswith(("stack", "cat", "concat", "concatenate", "vstack", "hstack")):
            if any(target_key(arg) == key or dotted(arg) == key for arg in call.args):
                return True
    return False
