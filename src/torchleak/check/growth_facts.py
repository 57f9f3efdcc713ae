"""Facts the growth analysis asks about single statements, loops and values: does an
assignment grow its target, does a loop run for the whole run or train, what is stored."""

from __future__ import annotations

import ast
import re

from torchleak.check.astutil import dotted, keyword, last_name, names_in, tokens, walk_local
from torchleak.check.context import Ctx, Func, Loop
from torchleak.check.rules.base import Analysis
from torchleak.check.steps import is_backward_call, is_data_iterable, is_optimizer_step

_STEP_CALL = re.compile(r"^_*(train|training|fit|optimi[sz]e|update)_?(step|batch|on_batch)$")
_FRESH_CALLS = {"time.time", "time.perf_counter", "time.monotonic", "uuid.uuid4",
                "datetime.now", "datetime.datetime.now"}
_COUNTER_WORDS = {"step", "steps", "iteration", "iter", "iters", "updates", "counter"}
_CONCAT_CALLS = {"torch.cat", "torch.concat", "torch.concatenate", "torch.vstack",
                 "torch.hstack", "torch.row_stack", "np.append", "np.concatenate", "np.vstack",
                 "np.hstack", "np.row_stack", "numpy.append", "numpy.concatenate",
                 "numpy.vstack", "numpy.hstack", "pd.concat", "pandas.concat"}
_RUN_LOOP_WORDS = {"epoch", "epochs", "step", "steps", "iteration", "iterations", "iters",
                   "iter", "round", "rounds", "episode", "episodes", "update", "updates",
                   "batches", "max", "total", "train", "training"}
_TENSOR_METHODS = {"detach", "clone", "cpu", "cuda", "to", "float", "half", "mean", "sum",
                   "view", "reshape", "softmax", "argmax", "max", "min", "flatten", "squeeze",
                   "unsqueeze", "norm", "abs", "sigmoid", "exp", "contiguous", "long"}
_VALUE_CALLS = {"item", "tolist", "float", "int", "str", "round", "len", "bool", "repr",
                "format", "join", "mean_value"}


def fresh_key(a: Analysis, key_expr: ast.AST | None, ctx: Ctx, loop: Loop | None,
              epoch_loop: Loop | None, repeat: Loop | None) -> bool:
    """The key takes a new value every step (the step counter), not one of a bounded
    set (a sample index, ``step % N``, a name)."""
    if key_expr is None or isinstance(key_expr, ast.Constant):
        return False
    names = names_in(key_expr)
    if any(isinstance(n, ast.BinOp) and isinstance(n.op, (ast.Mod, ast.FloorDiv))
           for n in ast.walk(key_expr)):
        return False
    if any(isinstance(n, ast.Call) and last_name(n.func) == "len" for n in ast.walk(key_expr)):
        return True
    fresh: set[str] = set()
    own: set[str] = set()
    outer: set[str] = set()
    if loop is not None:
        own = loop_vars(loop)
        if runs_for_the_run(loop, int_constants(a)):
            fresh |= own
        elif epoch_loop is not None and epoch_loop is not loop:
            outer = loop_vars(epoch_loop)
            if names & outer:
                fresh |= own  # (epoch, i): new every step
        fresh |= _counters(loop)
    for n in ast.walk(key_expr):
        if isinstance(n, ast.Attribute) and set(tokens(n.attr)) & _COUNTER_WORDS \
                and "batch" not in tokens(n.attr):
            return True  # ``self.global_step``, ``state.global_step``
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "id":
            return True  # ``cache[id(batch)]``: a new object every step
    attrs = {w for n in ast.walk(key_expr) if isinstance(n, ast.Attribute)
             for w in tokens(n.attr)} | {w for n in names for w in tokens(n)}
    if "epoch" in attrs and attrs & {"batch", "idx", "index", "i", "nb"}:
        return True  # ``(self.current_epoch, batch_idx)``: new every step
    if any(isinstance(n, ast.Call) and dotted(n.func) in _FRESH_CALLS
           for n in ast.walk(key_expr)):
        return True
    if loop is None and ctx.func is not None:
        params = {x.arg for x in ctx.func.args.args + ctx.func.args.kwonlyargs}
        fresh |= {p for p in params if set(tokens(p)) & _COUNTER_WORDS
                  and "batch" not in tokens(p)}
    fresh = {n for n in fresh if not _modulo_def(a, n, ctx)}
    if names & fresh:
        return True
    # ``global_step = epoch * len(loader) + i`` then ``d[global_step]``
    defs = a.taint.facts(ctx.func).defs
    for n in names:
        for d in defs.get(n, ()):
            used = names_in(d.value) if d.value is not None else set()
            if not _modulo_def(a, n, ctx) and (used & fresh or (used & outer and used & own)):
                return True
    return False


def _counters(loop: Loop) -> set[str]:
    """``global_step += 1`` inside the loop: a counter over the run."""
    found = set()
    for node in walk_local(loop):
        if isinstance(node, ast.AugAssign) and isinstance(node.op, ast.Add) \
                and isinstance(node.target, ast.Name):
            found.add(node.target.id)
    return found

def _modulo_def(a: Analysis, name: str, ctx: Ctx) -> bool:
    defs = a.taint.facts(ctx.func).defs.get(name, [])
    return any(d.value is not None and any(isinstance(n, ast.BinOp) and isinstance(
        n.op, ast.Mod) for n in ast.walk(d.value)) for d in defs)


def target_keys(node: ast.Assign) -> set[str]:
    found = set()
    for t in node.targets:
        for elt in (t.elts if isinstance(t, (ast.Tuple, ast.List)) else [t]):
            found.add(dotted(elt))
    return found


def first_fill(ctx: Ctx, key: str) -> bool:
    """Under ``if key is None`` / ``if not key`` / ``if len(key) == 0``: the first fill."""
    for node in ctx.ifs:
        test = getattr(node, "test", None)
        if test is None:
            continue
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not) \
                and dotted(test.operand) == key:
            return True
        for sub in ast.walk(test):
            if isinstance(sub, ast.Compare) and dotted(sub.left) == key and any(
                    isinstance(c, ast.Constant) and c.value is None for c in sub.comparators):
                return True
    return False


def one_number(a: Analysis, node: ast.AST, value: ast.AST | None, ctx: Ctx) -> bool:
    """``xs.append(loss.item())``: one Python number (or a small tuple of them)."""
    if isinstance(node, ast.Call) and not (isinstance(node.func, ast.Attribute)
                                           and node.func.attr in ("append", "appendleft", "add",
                                                                  "insert", "update")):
        return False
    if isinstance(value, ast.JoinedStr) or (isinstance(value, ast.Call)
                                            and last_name(value.func) in ("str", "format")):
        return False  # a string: its length is unbounded
    return stored_kind(a, value, ctx) == "value"


def unbounded_cached_functions(a: Analysis) -> set[str]:
    """Module functions under ``@cache``/``@lru_cache(maxsize=None)``."""
    found = set()
    for func, ctx in a.index.funcs:
        if ctx.func is not None or ctx.cls is not None:
            continue
        for deco in func.decorator_list:
            name = last_name(deco.func if isinstance(deco, ast.Call) else deco)
            if name == "cache" or (name == "lru_cache" and isinstance(deco, ast.Call) and (
                    (keyword(deco, "maxsize") is not None
                     and isinstance(keyword(deco, "maxsize"), ast.Constant)
                     and keyword(deco, "maxsize").value is None)  # type: ignore[union-attr]
                    or (deco.args and isinstance(deco.args[0], ast.Constant)
                        and deco.args[0].value is None))):
                found.add(func.name)
    return found


def grows_from(value: ast.AST, key: str) -> bool:
    """``x = torch.cat([x, v])``, ``x = np.append(x, v)``, ``x = x + [v]``, ``s = s + "..."``."""
    if not key:
        return False
    if isinstance(value, ast.Call) and dotted(value.func) in _CONCAT_CALLS and value.args:
        first = value.args[0]
        parts = first.elts if isinstance(first, (ast.List, ast.Tuple)) else value.args[:1]
        return any(dotted(p) == key for p in parts)
    if isinstance(value, ast.BinOp) and isinstance(value.op, ast.Add):
        other = value.right if dotted(value.left) == key else (
            value.left if dotted(value.right) == key else None)
        return other is not None and (
            isinstance(other, (ast.List, ast.Tuple, ast.JoinedStr, ast.ListComp))
            or (isinstance(other, ast.Constant) and isinstance(other.value, str)))
    return False


def added(value: ast.AST, key: str) -> ast.AST | None:
    if isinstance(value, ast.Call) and value.args:
        first = value.args[0]
        parts = first.elts if isinstance(first, (ast.List, ast.Tuple)) else value.args
        rest = [p for p in parts if dotted(p) != key]
        return rest[0] if rest else None
    if isinstance(value, ast.BinOp):
        return value.right if dotted(value.left) == key else value.left
    return None


def trains(loop: Loop) -> bool:
    """The loop runs training steps: a backward, an optimizer step, or a step function."""
    for node in walk_local(loop):
        if isinstance(node, ast.Call) and (is_backward_call(node) or is_optimizer_step(node)
                                           or _STEP_CALL.match(last_name(node.func))):
            return True
    return False


def loop_vars(loop: Loop) -> set[str]:
    target = getattr(loop, "target", None)
    return names_in(target) if target is not None else set()


def int_constants(a: Analysis) -> dict[str, int]:
    """Module-level ``NAME = 5000``: the bounds scripts give their loops."""
    found = a.index.cache.get("int_constants")
    if not isinstance(found, dict):
        found = {}
        for node in a.index.tree.body:
            if isinstance(node, ast.Assign) and len(node.targets) == 1 \
                    and isinstance(node.targets[0], ast.Name) \
                    and isinstance(node.value, ast.Constant) \
                    and type(node.value.value) is int:
                found[node.targets[0].id] = node.value.value
        a.index.cache["int_constants"] = found
    return found


def runs_for_the_run(loop: Loop, consts: dict[str, int] | None = None) -> bool:
    """``while ...``, ``for epoch in range(...)``, ``for step in range(max_steps)``,
    ``itertools.count()``: a loop over the run, not one pass over a data set."""
    if isinstance(loop, ast.While):
        return True
    it = loop.iter
    words = set(tokens(" ".join(names_in(loop.target)).replace(" ", "_")))
    for n in ast.walk(it):
        if isinstance(n, ast.Call) and last_name(n.func) in ("range", "trange", "count",
                                                               "cycle", "repeat"):
            inner = n.args
            if last_name(n.func) not in ("range", "trange") or not inner:
                return True
            if any(is_data_iterable(x) for x in inner):
                return bool(words & _RUN_LOOP_WORDS)  # ``range(len(dataset))``
            bound = {w for x in inner for m in ast.walk(x)
                     if isinstance(m, (ast.Name, ast.Attribute)) for w in tokens(last_name(m))}
            values = [x.value if isinstance(x, ast.Constant) else (consts or {}).get(
                x.id) if isinstance(x, ast.Name) else None for x in inner]
            big = any(isinstance(v, int) and v >= 100 for v in values)
            # ``range(epochs)``, ``range(args.max_steps)``, ``range(10_000)``; not
            # ``range(profiling_count)`` or ``range(3)``
            return bool((words | bound) & _RUN_LOOP_WORDS) or big
    return bool(words & _RUN_LOOP_WORDS) and not is_data_iterable(it)


def is_param(func: Func, name: str) -> bool:
    args = func.args
    every = args.posonlyargs + args.args + args.kwonlyargs
    every += [x for x in (args.vararg, args.kwarg) if x is not None]
    return any(x.arg == name for x in every)


# -- what is stored ----------------------------------------------------------------------
def stored_kind(a: Analysis, value: ast.AST | None, ctx: Ctx, depth: int = 0) -> str:
    """"graph", "tensor", "array", "value" (a Python number or string) or "object"."""
    if value is None or depth > 6:
        return "object"
    if depth == 0 and a.taint.carries_graph(value, ctx):
        return "graph"
    if isinstance(value, (ast.Dict, ast.Tuple, ast.List, ast.Set)):
        parts = value.values if isinstance(value, ast.Dict) else value.elts
        kinds = [stored_kind(a, p, ctx, depth + 1) for p in parts if p is not None]
        for k in ("tensor", "array", "object", "value"):
            if k in kinds:
                return k
        return "value"
    if isinstance(value, (ast.Constant, ast.JoinedStr, ast.Compare)):
        return "value"
    if isinstance(value, (ast.ListComp, ast.SetComp, ast.GeneratorExp)):
        return stored_kind(a, value.elt, ctx, depth + 1)
    if isinstance(value, ast.BinOp):
        kinds = {stored_kind(a, value.left, ctx, depth + 1),
                 stored_kind(a, value.right, ctx, depth + 1)}
        for k in ("tensor", "array", "value"):
            if k in kinds:
                return k
        return "object"
    if isinstance(value, ast.Call):
        name = last_name(value.func)
        full = dotted(value.func)
        if name in _VALUE_CALLS and name != "copy":
            return "value"
        if full.startswith(("np.", "numpy.")) or name == "numpy":
            return "array"
        if name == "copy" and isinstance(value.func, ast.Attribute):
            return stored_kind(a, value.func.value, ctx, depth + 1)
        if full.startswith("torch.") or name in _TENSOR_METHODS:
            return "tensor"
        return "object"
    if isinstance(value, ast.Attribute):
        if value.attr in ("grad", "data", "weight", "bias"):
            return "tensor"
        return "object"
    if isinstance(value, ast.Name):
        defs = a.taint.facts(ctx.func).defs.get(value.id, [])
        before = [d for d in defs if d.pos < (getattr(value, "lineno", 0), 0)]
        d = before[-1] if before else None
        if d is not None and d.value is not None and d.index is None:
            return stored_kind(a, d.value, ctx, depth + 1)
        if d is not None and d.value is not None and isinstance(d.value, ast.Call) \
                and depth == 0 and a.taint.carries_graph(value, ctx):
            return "graph"
    return "object"
