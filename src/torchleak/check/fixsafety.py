"""When a fix cannot change what the program does.

``.item()`` turns a tensor into a float: safe only when every later use of the value
works on a float too. ``.detach()`` keeps a tensor a tensor: safe when the value is known
to be a tensor (a model can return a tuple or a dict). Closing a figure is safe only when
nothing draws or saves after the close. Each check is conservative: unsure means unsafe.
"""

from __future__ import annotations

import ast

from torchleak.check.astutil import dotted, last_name, tokens, walk_local
from torchleak.check.context import Ctx
from torchleak.check.rules.base import Analysis
from torchleak.check.taint import is_source_call

# Calls that accept a float as well as a tensor.
_NUMBER_FUNCS = {"print", "float", "int", "round", "str", "abs", "max", "min", "sum", "len",
                 "format", "repr", "list", "tuple", "sorted", "isnan", "isfinite", "isinf"}
_NUMBER_MODULES = ("math.", "np.", "numpy.", "statistics.", "logging.", "logger.", "log.",
                   "wandb.", "mlflow.", "json.", "torch.tensor", "torch.as_tensor")
_NUMBER_METHODS = {"info", "debug", "warning", "error", "write", "set_postfix",
                   "set_description", "add_scalar", "add_scalars", "log", "log_metrics",
                   "log_dict", "append", "format", "update"}
_LIST_METHODS = {"append", "extend", "insert", "clear", "pop", "appendleft", "popleft",
                 "remove", "add", "update"}
_ARITHMETIC = (ast.BinOp, ast.UnaryOp, ast.IfExp)
_TENSOR_METHODS = {"mean", "sum", "detach", "float", "cpu", "cuda", "to", "view", "reshape",
                   "squeeze", "unsqueeze", "clone", "abs", "pow", "sqrt", "exp", "log"}
_LOSS_WORDS = {"loss", "criterion", "entropy", "kl", "mse", "nll"}


def parents(a: Analysis, scope: ast.AST) -> dict[int, ast.AST]:
    key = ("parents", id(scope))
    found = a.index.cache.get(key)
    if not isinstance(found, dict):
        found = {}
        for node in walk_local(scope):
            for child in ast.iter_child_nodes(node):
                found[id(child)] = node
        a.index.cache[key] = found
    return found


def scalar_loss(a: Analysis, value: ast.AST, ctx: Ctx) -> bool:
    """``loss.backward()`` with no arguments is called on it: a one-element tensor."""
    name = dotted(value)
    if not name:
        return False
    for call, _ in a.index.calls_in(ctx.func):
        if isinstance(call.func, ast.Attribute) and call.func.attr == "backward" \
                and not call.args and dotted(call.func.value) == name:
            return True
    return False


def known_tensor(a: Analysis, value: ast.AST, ctx: Ctx, depth: int = 0) -> bool:
    """The value is certainly a tensor (not a tuple, dict or model output object)."""
    if depth > 6:
        return False
    if scalar_loss(a, value, ctx):
        return True
    if isinstance(value, ast.Name):
        defs = a.taint.facts(ctx.func).defs.get(value.id, [])
        d = max((d for d in defs if d.pos < (value.lineno, value.col_offset)),
                key=lambda d: d.pos, default=None)
        return d is not None and d.index is None and d.value is not None \
            and known_tensor(a, d.value, ctx, depth + 1)
    if isinstance(value, ast.BinOp):
        return known_tensor(a, value.left, ctx, depth + 1) \
            or known_tensor(a, value.right, ctx, depth + 1)
    if isinstance(value, ast.Attribute):
        return value.attr == "loss"  # ``outputs.loss`` of a Hugging Face model
    if isinstance(value, ast.Call):
        full = dotted(value.func)
        if full.startswith(("torch.", "F.")) and not full.startswith("torch.nn.utils"):
            return True
        if isinstance(value.func, ast.Attribute) and value.func.attr in _TENSOR_METHODS:
            return known_tensor(a, value.func.value, ctx, depth + 1)
        words = tokens(last_name(value.func))
        return is_source_call(value) and bool(words) and words[-1] in _LOSS_WORDS
    return False


def used_as_number_only(a: Analysis, name: str, ctx: Ctx, site: ast.AST,
                        depth: int = 0) -> bool:
    """Every other read of the variable ``name`` in its scope works on a float too."""
    if depth > 2 or "." in name:
        return False
    scope = ctx.func or a.index.tree
    up = parents(a, scope)
    for node in walk_local(scope):
        if isinstance(node, ast.Name) and node.id == name and isinstance(node.ctx, ast.Load) \
                and not _inside(node, site, up):
            if not _numeric_consumer(a, node, up, ctx, depth):
                return False
    return True


def _inside(node: ast.AST, site: ast.AST, up: dict[int, ast.AST]) -> bool:
    while node is not None:
        if node is site:
            return True
        node = up.get(id(node))  # type: ignore[assignment]
    return False


def _numeric_consumer(a: Analysis, node: ast.AST, up: dict[int, ast.AST], ctx: Ctx,
                      depth: int) -> bool:
    child, parent = node, up.get(id(node))
    while isinstance(parent, _ARITHMETIC):
        child, parent = parent, up.get(id(parent))
    if isinstance(parent, (ast.Compare, ast.FormattedValue, ast.AugAssign)):
        return True
    if isinstance(parent, ast.Dict) and isinstance(up.get(id(parent)), ast.Call):
        return _number_call(up[id(parent)])  # ``wandb.log({"loss": total})``
    if isinstance(parent, ast.Call) and child is not parent.func:
        return _number_call(parent)
    if isinstance(parent, ast.keyword) and isinstance(up.get(id(parent)), ast.Call):
        return _number_call(up[id(parent)])
    if isinstance(parent, ast.Assign) and len(parent.targets) == 1 \
            and isinstance(parent.targets[0], ast.Name):
        return used_as_number_only(a, parent.targets[0].id, ctx, parent, depth + 1)
    return False  # returned, stored, or a method called on it: it must stay a tensor


def _number_call(call: ast.AST) -> bool:
    if not isinstance(call, ast.Call):
        return False
    full = dotted(call.func)
    if isinstance(call.func, ast.Name):
        return call.func.id in _NUMBER_FUNCS
    return full.startswith(_NUMBER_MODULES) or last_name(call.func) in _NUMBER_METHODS


def list_used_as_numbers(a: Analysis, key: str, ctx: Ctx) -> bool:
    """A container's reads other than growing it accept floats (``sum``, ``np.mean``,
    ``len``, ``torch.tensor``); stacking or tensor methods on elements do not."""
    if not key:
        return False
    scope = ctx.func if ctx.func is not None and not key.startswith("self.") \
        else a.index.tree
    up = _module_parents(a)
    for node in ast.walk(scope):
        if not isinstance(node, (ast.Name, ast.Attribute)) or dotted(node) != key \
                or not isinstance(node.ctx, ast.Load):
            continue
        parent = up.get(id(node))
        if isinstance(parent, ast.Attribute) and parent.attr in _LIST_METHODS:
            continue
        if isinstance(parent, ast.Call) and node is not parent.func and _number_call(parent) \
                and dotted(parent.func) not in ("list", "tuple", "sorted"):
            continue
        return False
    return True


def _module_parents(a: Analysis) -> dict[int, ast.AST]:
    found = a.index.cache.get("module_parents")
    if not isinstance(found, dict):
        found = {id(c): p for p in ast.walk(a.index.tree) for c in ast.iter_child_nodes(p)}
        a.index.cache["module_parents"] = found
    return found


def draws_after(a: Analysis, owner: ast.AST, module: str, figure: str,
                scope: ast.AST) -> bool:
    """Code after ``owner`` still uses pyplot's current figure or the figure itself."""
    end = getattr(owner, "end_lineno", None) or 0
    for node in walk_local(scope):
        if getattr(node, "lineno", 0) <= end:
            continue
        if isinstance(node, ast.Name) and figure and node.id == figure:
            return True
        if isinstance(node, ast.Call):
            full = dotted(node.func)
            if full.startswith(f"{module}.") and last_name(node.func) not in (
                    "figure", "subplots", "close", "subplot_mosaic"):
                return True
    return False


def returns_graph(a: Analysis, func: ast.AST) -> bool:
    """The function returns or yields something that may carry a graph."""
    for node in walk_local(func):
        if isinstance(node, (ast.Return, ast.Yield, ast.YieldFrom)) and node.value is not None:
            stmt_ctx = a.index.stmt_ctx.get(node) if isinstance(node, ast.Return) else None
            ctx = stmt_ctx or Ctx(func)  # type: ignore[arg-type]
            if isinstance(node.value, ast.Constant):
                continue
            if not isinstance(node, ast.Return) or a.taint.carries_graph(node.value, ctx,
                                                                          opaque=True):
                return True
            if _may_hold_tensors(node.value):
                return True
    return False


def _may_hold_tensors(value: ast.AST) -> bool:
    """A returned name or container whose content the checker cannot vouch for."""
    if isinstance(value, (ast.Tuple, ast.List)):
        return any(_may_hold_tensors(e) for e in value.elts)
    if isinstance(value, ast.Call):
        name = last_name(value.func)
        return name not in ("item", "float", "int", "round", "len", "sum", "mean", "dict",
                            "tolist", "numpy") and not dotted(value.func).startswith(
                                ("np.", "numpy.", "math.", "statistics."))
    return isinstance(value, (ast.Name, ast.Attribute, ast.Subscript))
