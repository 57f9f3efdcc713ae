"""Which long-lived containers gain something every training step and are never bounded.

A *growth site* is a statement that makes a container bigger (``xs.append(v)``,
``d[step] = v``, ``x = torch.cat([x, v])``, ``log += f"..."``) where:

* it runs once per step: in the body of a batch loop, or in a function that runs once per
  step (``training_step``, ``on_train_batch_end``, a ``train_step`` helper called from the
  loop), not only every N steps;
* the container outlives the whole run: it lives at module level, on a class, on ``self``,
  or is a local of the training function made before a loop over steps or epochs (a local
  list filled over one pass of a data loader is bounded by the data set);
* nothing resets it: no ``clear()``/``pop``/``del``/re-assignment/slicing trim, no length
  check, no ``deque(maxlen=...)``, and for ``d[k] = v`` the key changes with every step
  (the step counter, not the index of a sample within an epoch).
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from torchleak.check.astutil import dotted, keyword, last_name, names_in, root_name, target_key
from torchleak.check.astutil import tokens, walk_local
from torchleak.check.context import Ctx, Func, Loop
from torchleak.check.growth_facts import (
    added,
    first_fill,
    fresh_key,
    grows_from,
    int_constants,
    is_param,
    loop_vars,
    one_number,
    runs_for_the_run,
    target_keys,
    trains,
    unbounded_cached_functions,
)
from torchleak.check.rules.base import Analysis
from torchleak.check.roles import runs_per_step
from torchleak.check.rules.lifetime import runs_per_sample
from torchleak.check.steps import is_backward_call, is_optimizer_step

_GROW_METHODS = {"append", "extend", "insert", "appendleft", "add"}
_SHRINK_METHODS = {"clear", "pop", "popleft", "popitem", "remove", "discard", "reset"}
_STEP_CALL = re.compile(r"^_*(train|training|fit|optimi[sz]e|update)_?(step|batch|on_batch)$")
_CONTAINER_CALLS = {"list", "dict", "set", "defaultdict", "OrderedDict", "deque", "Counter"}


@dataclass(frozen=True)
class Site:
    """One statement that makes a long-lived container bigger every step."""

    node: ast.AST           # what is reported: the call or the assignment
    key: str                # the container as written: ``history``, ``self.cache``
    kind: str               # "append", "keyed", "rebind"
    value: ast.AST | None   # what is stored
    ctx: Ctx
    scope: str              # "module", "self", "local"
    loop: Loop | None       # the batch loop, or None in a per-step function
    repeat: Loop | None     # a loop inside the step that repeats the growth
    epoch_loop: Loop | None  # the loop the container should be cleared in, when known


def growth_sites(a: Analysis) -> list[Site]:
    cached = a.index.cache.get("growth_sites")
    if isinstance(cached, list):
        return cached
    sites = _Finder(a).run()
    a.index.cache["growth_sites"] = sites
    return sites


def site_at(a: Analysis, node: ast.AST) -> Site | None:
    return next((s for s in growth_sites(a) if s.node is node), None)


class _Finder:
    def __init__(self, a: Analysis) -> None:
        self.a = a
        self.module_names: set[str] = set()
        self.values: dict[str, list[tuple[ast.AST, Ctx, ast.stmt]]] = {}
        self.resets: set[str] = set()  # keys cleared, trimmed or re-bound somewhere
        self.guarded: set[str] = set()  # keys whose length is compared
        self.globals: dict[int, set[str]] = {}
        self._collect()

    # -- facts about the whole module --------------------------------------------------
    def _collect(self) -> None:
        a = self.a
        for node, ctx in a.index.assigns:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                elts = t.elts if isinstance(t, (ast.Tuple, ast.List)) else [t]
                parts = node.value.elts if isinstance(node.value, (ast.Tuple, ast.List)) \
                    and len(elts) > 1 and len(node.value.elts) == len(elts) else None
                for i, elt in enumerate(elts):
                    value = parts[i] if parts is not None else node.value
                    key = dotted(elt)
                    if not key:
                        if isinstance(elt, ast.Subscript) and isinstance(elt.slice, ast.Slice):
                            self.resets.add(target_key(elt))  # ``xs[:] = ...``
                        continue
                    if ctx.func is None and ctx.cls is None and isinstance(elt, ast.Name):
                        self.module_names.add(key)
                    elif ctx.func is None and ctx.cls is not None and isinstance(elt, ast.Name):
                        # a class attribute, reached as ``Cls.attr`` (or ``self.attr``)
                        if value is not None:
                            self.values.setdefault(f"{ctx.cls.name}.{key}", []).append(
                                (value, ctx, node))
                        self.module_names.add(ctx.cls.name)
                    if value is not None:
                        self.values.setdefault(key, []).append((value, ctx, node))
        for call, ctx in a.index.calls:
            func = call.func
            if isinstance(func, ast.Attribute) and func.attr in _SHRINK_METHODS:
                self.resets.add(target_key(func.value))
        for stmt, ctx in a.index.stmt_ctx.items():
            if isinstance(stmt, ast.Delete):
                self.resets.update(target_key(t) for t in stmt.targets)
            elif isinstance(stmt, ast.Global) and ctx.func is not None:
                self.globals.setdefault(id(ctx.func), set()).update(stmt.names)
        for node in ast.walk(a.index.tree):
            if isinstance(node, ast.Compare):
                for sub in ast.walk(node):
                    if isinstance(sub, ast.Call) and last_name(sub.func) == "len" and sub.args:
                        self.guarded.add(target_key(sub.args[0]))

    def _reset_elsewhere(self, key: str) -> bool:
        """Cleared, trimmed or rebound to something new outside its first definition."""
        if key in self.resets or key in self.guarded:
            return True
        defs = self.values.get(key, [])
        for value, ctx, _stmt in defs[1:]:
            if first_fill(ctx, key):
                continue  # ``if x is None: x = v`` starts the container, it does not reset it
            if not grows_from(value, key) and not self._sequence_plus(value, key):
                return True
            if isinstance(value, ast.Subscript) and dotted(value.value) == key:
                return True  # ``xs = xs[-100:]``
        return False

    # -- the sites ------------------------------------------------------------------
    def run(self) -> list[Site]:
        a = self.a
        found: list[Site] = []
        for call, ctx in a.index.calls:
            func = call.func
            if isinstance(func, ast.Attribute) and func.attr == "update" and len(call.args) == 1 \
                    and isinstance(call.args[0], ast.Dict) and len(call.args[0].keys) == 1 \
                    and call.args[0].keys[0] is not None:
                # ``d.update({step: out})``: a keyed write
                site = self._site(call, func.value, "keyed", call.args[0].values[0], ctx,
                                  call.args[0].keys[0])
                if site is not None:
                    found.append(site)
            if isinstance(func, ast.Attribute) and func.attr in _GROW_METHODS and call.args \
                    and not call.keywords:
                container = func.value
                if isinstance(container, ast.Call) and isinstance(container.func, ast.Attribute) \
                        and container.func.attr == "setdefault":
                    container = container.func.value  # ``d.setdefault(k, []).append(v)``
                if func.attr == "add" and not (self._is_set(target_key(container)) and fresh_key(
                        self.a, call.args[0], ctx, self.a.index.innermost_step_loop(ctx), None,
                        None)):
                    continue  # a set grows only with values never seen before
                base = container.value if isinstance(container, ast.Subscript) else container
                if isinstance(base, ast.Attribute) and dotted(base.value) == "self":
                    continue  # a list on ``self``: TL202/TL103 report it
                site = self._site(call, container, "append", call.args[-1], ctx)
                if site is not None:
                    found.append(site)
        for node, ctx in a.index.assigns:
            if not isinstance(node, ast.Assign) or len(node.targets) != 1:
                continue
            target = node.targets[0]
            if isinstance(target, ast.Subscript) and not isinstance(target.slice, ast.Slice):
                site = self._site(node, target.value, "keyed", node.value, ctx, target.slice)
            elif isinstance(target, (ast.Name, ast.Attribute)) and (
                    grows_from(node.value, dotted(target))
                    or self._sequence_plus(node.value, dotted(target))):
                site = self._site(node, target, "rebind", added(node.value, dotted(target)),
                                  ctx)
            else:
                site = None
            if site is not None:
                found.append(site)
        cached = unbounded_cached_functions(a)
        for call, ctx in a.index.calls:
            if isinstance(call.func, ast.Name) and call.func.id in cached and call.args:
                site = self._cached_call(call, ctx)
                if site is not None:
                    found.append(site)
        for node, ctx in a.index.augassigns:
            if isinstance(node.op, ast.Add) and isinstance(node.target, (ast.Name, ast.Attribute)) \
                    and self._sequence_added(node, ctx):
                site = self._site(node, node.target, "rebind", node.value, ctx)
                if site is not None:
                    found.append(site)
        return found

    def _site(self, node: ast.AST, container: ast.AST, kind: str, value: ast.AST | None,
              ctx: Ctx, key_expr: ast.AST | None = None) -> Site | None:
        key = target_key(container)
        root = root_name(container)
        if not key or not root:
            return None
        step = self._step_of(ctx, node)
        if step is None:
            return None
        loop, repeat = step
        scope = self._scope(root, ctx)
        if scope is None:
            return None
        if kind == "append" and not self._growable(key):
            return None
        if kind == "keyed" and not self._is_dict(key):
            return None  # ``losses[step] = v`` into a preallocated array or list
        if self._reset_elsewhere(key) if scope != "local" else self._reset_local(key, ctx):
            return None
        if scope == "local" and loop is None:
            return None  # a local of a per-step function is made anew at every call
        epoch_loop = self._run_loop(ctx, loop) if scope == "local" or ctx.loops else None
        if scope == "local" and (epoch_loop is None or not (
                trains(epoch_loop) or (ctx.func is None
                                        and self._steps_through_calls(epoch_loop)))):
            return None  # one pass over the data (bounded by its length), or not training
        if kind == "keyed" and not fresh_key(self.a, key_expr, ctx, loop, epoch_loop, repeat):
            return None
        if repeat is not None and kind == "keyed" and key_expr is not None and not (
                names_in(key_expr) & loop_vars(repeat)):
            repeat = None  # the inner loop overwrites one key
        if kind in ("append", "keyed") and repeat is None and one_number(self.a, node, value,
                                                                          ctx):
            return None  # one float per step: bytes per step, left to ``torchleak run``
        return Site(node, key, kind, value, ctx, scope, loop, repeat, epoch_loop)

    def _cached_call(self, call: ast.Call, ctx: Ctx) -> Site | None:
        """``noise_mask(step)`` on an ``lru_cache(maxsize=None)`` function: one more cached
        result per step."""
        step = self._step_of(ctx, call)
        if step is None:
            return None
        loop, repeat = step
        epoch_loop = self._run_loop(ctx, loop) if ctx.loops else None
        key = ast.Tuple(elts=list(call.args), ctx=ast.Load())
        if not fresh_key(self.a, key, ctx, loop, epoch_loop, repeat):
            return None
        return Site(call, call.func.id, "cached", call, ctx, "module", loop, None,  # type: ignore[attr-defined]
                    None)

    # -- once per step ---------------------------------------------------------------
    def _step_of(self, ctx: Ctx, node: ast.AST) -> tuple[Loop | None, Loop | None] | None:
        """(batch loop, repeating loop inside the step) when ``node`` runs every step."""
        from torchleak.check.rules.lifetime import _periodic

        a = self.a
        if isinstance(node, ast.Call) and _periodic(ctx, node):
            return None
        if isinstance(node, ast.stmt) and _periodic(ctx, node):  # type: ignore[arg-type]
            return None
        for i in range(len(ctx.loops) - 1, -1, -1):
            loop = ctx.loops[i]
            through = self._steps_through_calls(loop)
            if a.index.is_step_loop(loop) or through:
                if not through and not a.index.is_batch_loop(loop):
                    return None  # once per epoch
                inner = ctx.loops[i + 1:]
                return loop, (inner[0] if inner else None)
        if runs_per_step(a.index, ctx.func) or runs_per_sample(ctx) or self._hook(ctx.func):
            return None, (ctx.loops[0] if ctx.loops else None)
        return None

    def _steps_through_calls(self, loop: Loop) -> bool:
        """A loop over the run whose body trains through a helper (``train_step(...)``), or
        whose variable names the step (``for step in range(n)``)."""
        key = ("steps_through", id(loop))
        if key not in self.a.index.cache:
            found = False
            if isinstance(loop, (ast.For, ast.AsyncFor)) and runs_for_the_run(
                    loop, int_constants(self.a)):
                words = {w for n in loop_vars(loop) for w in tokens(n)}
                found = bool(words & {"step", "iteration", "iter"}) or any(
                    isinstance(n, ast.Call) and self._trains_inside(n) for n in walk_local(loop))
                found = found and not any(isinstance(n, (ast.For, ast.AsyncFor, ast.While))
                                          and self.a.index.is_step_loop(n)
                                          for n in walk_local(loop))
            self.a.index.cache[key] = found
        return bool(self.a.index.cache[key])

    def _trains_inside(self, call: ast.Call) -> bool:
        name = last_name(call.func)
        if _STEP_CALL.match(name):
            return True
        # a helper that takes one step (not one that loops over a loader: an epoch)
        funcs = [f for f, _c in self.a.index.funcs if f.name == name]
        return any(isinstance(n, ast.Call) and (is_backward_call(n) or is_optimizer_step(n))
                   and not self.a.index.stmt_ctx.get(_stmt_of(f, n), Ctx()).loops
                   for f in funcs for n in walk_local(f))

    def _hook(self, func: Func | None) -> bool:
        """A function registered as a module hook runs at every forward or backward."""
        if func is None:
            return False
        hooks = self.a.index.cache.get("hook_functions")
        if not isinstance(hooks, set):
            hooks = set()
            for call, _ctx in self.a.index.calls:
                if last_name(call.func).startswith("register_") and \
                        last_name(call.func).endswith("hook"):
                    hooks.update(last_name(x) for x in call.args)
                collate = keyword(call, "collate_fn")  # runs for every batch
                if collate is not None:
                    hooks.add(last_name(collate))
            self.a.index.cache["hook_functions"] = hooks
        return func.name in hooks

    # -- where the container lives ---------------------------------------------------
    def _scope(self, root: str, ctx: Ctx) -> str | None:
        if root == "self":
            return "self" if ctx.cls is not None else None
        func = ctx.func
        if func is None:
            return "local" if root in self.module_names else None
        if root in self.globals.get(id(func), set()):
            return "module"
        if root in self.a.taint.facts(func).defs or is_param(func, root):
            return "local" if root in self.a.taint.facts(func).defs else None
        return "module" if root in self.module_names else None

    def _growable(self, key: str) -> bool:
        """Made as a plain list/dict/set (a bounded deque or an unknown object is not)."""
        values = [v for v, _c, _s in self.values.get(key, [])]
        if not values:
            return False
        first = values[0]
        if isinstance(first, (ast.List, ast.Dict, ast.Set, ast.ListComp, ast.DictComp)):
            return True
        if isinstance(first, ast.Call):
            name = dotted(first.func).split(".")[-1]
            if name == "deque":
                return keyword(first, "maxlen") is None and len(first.args) < 2
            return name in _CONTAINER_CALLS
        return False

    def _is_dict(self, key: str) -> bool:
        values = [v for v, _c, _s in self.values.get(key, [])]
        if not values:
            return False
        first = values[0]
        return isinstance(first, (ast.Dict, ast.DictComp)) or (
            isinstance(first, ast.Call)
            and last_name(first.func) in ("dict", "defaultdict", "OrderedDict", "Counter"))

    def _is_set(self, key: str) -> bool:
        values = [v for v, _c, _s in self.values.get(key, [])]
        return bool(values) and (isinstance(values[0], ast.Set) or (
            isinstance(values[0], ast.Call) and last_name(values[0].func) == "set"))

    def _reset_local(self, key: str, ctx: Ctx) -> bool:
        """A local container re-made or cleared inside a loop that encloses the growth, or
        trimmed anywhere in its function."""
        for loop in ctx.loops:
            for node in walk_local(loop):
                if isinstance(node, ast.Assign) and key in target_keys(node) \
                        and not grows_from(node.value, key) and not (
                            key in names_in(node.value)) and not first_fill(
                            self.a.index.stmt_ctx.get(node, Ctx()), key):
                    return True  # made anew inside a loop around the growth
        scope = ctx.func or self.a.index.tree
        for node in walk_local(scope):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                    and node.func.attr in _SHRINK_METHODS and target_key(node.func.value) == key:
                return True
            if isinstance(node, ast.Compare) and any(
                    isinstance(s, ast.Call) and last_name(s.func) == "len" and s.args
                    and target_key(s.args[0]) == key for s in ast.walk(node)):
                return True
            if isinstance(node, ast.Assign) and any(dotted(t) == key for t in node.targets) \
                    and isinstance(node.value, ast.Subscript) \
                    and dotted(node.value.value) == key:
                return True
            if isinstance(node, ast.Delete) and any(target_key(t) == key for t in node.targets):
                return True
        return False

    def _run_loop(self, ctx: Ctx, loop: Loop | None) -> Loop | None:
        """The loop whose passes the container outlives: an epoch loop around the batch
        loop, or a batch loop over the whole run (``range(steps)``, ``while True``)."""
        candidates = ctx.loops if loop is None else ctx.loops[:ctx.loops.index(loop) + 1]
        for candidate in candidates:
            if runs_for_the_run(candidate, int_constants(self.a)):
                return candidate
        return None

    # -- keys and values -------------------------------------------------------------
    def _sequence_plus(self, value: ast.AST, key: str) -> bool:
        """``xs = xs + more`` where ``xs`` starts as a list or a string."""
        if not (isinstance(value, ast.BinOp) and isinstance(value.op, ast.Add)
                and dotted(value.left) == key):
            return False
        firsts = self.values.get(key, [])
        first = firsts[0][0] if firsts else None
        return isinstance(first, (ast.List, ast.JoinedStr)) or (
            isinstance(first, ast.Constant) and isinstance(first.value, str))

    def _sequence_added(self, node: ast.AugAssign, ctx: Ctx) -> bool:
        """``s += "..."`` / ``xs += [v]``: the left side is a string or a list."""
        value = node.value
        if isinstance(value, (ast.JoinedStr, ast.List, ast.Tuple, ast.ListComp)):
            return True
        if isinstance(value, ast.Constant) and isinstance(value.value, str):
            return True
        if isinstance(value, ast.BinOp) and any(
                isinstance(s, ast.JoinedStr) or (isinstance(s, ast.Constant)
                                                 and isinstance(s.value, str))
                for s in (value.left, value.right)):
            return True
        if isinstance(value, ast.Call) and (last_name(value.func) in ("str", "format", "repr")
                                            or dotted(value.func) == "json.dumps"):
            return True
        firsts = self.values.get(dotted(node.target), [])
        if firsts:
            first = firsts[0][0]
            return (isinstance(first, ast.Constant) and isinstance(first.value, str)) or \
                isinstance(first, (ast.List, ast.JoinedStr))
        return False


def _stmt_of(func: Func, node: ast.AST) -> ast.stmt | None:
    """The statement of ``func`` that contains ``node``."""
    line = getattr(node, "lineno", 0)
    best: ast.stmt | None = None
    for stmt in walk_local(func):
        if isinstance(stmt, ast.stmt) and stmt.lineno <= line <= (stmt.end_lineno or 0):
            if best is None or stmt.lineno >= best.lineno:
                best = stmt
    return best
