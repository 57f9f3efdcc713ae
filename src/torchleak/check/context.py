"""One pass over a module that records, for every statement and call, where it runs:
which function and class, inside which loops, and whether autograd is off there.

Rules query this index instead of walking the tree again, which keeps a 100k-line
tree at a few seconds.
"""

from __future__ import annotations

import ast
import builtins
from dataclasses import dataclass, field

from torchleak.check.astutil import FUNCS, LOOPS, dotted, last_name

Loop = ast.For | ast.AsyncFor | ast.While
Func = ast.FunctionDef | ast.AsyncFunctionDef

_GRAD_OFF_CALLS = {
    "torch.no_grad", "no_grad", "torch.inference_mode", "inference_mode",
    "torch.autograd.no_grad", "torch.autograd.grad_mode.no_grad",
}
# Lightning runs these hooks under no_grad/inference_mode itself.
_LIGHTNING_EVAL = ("validation_step", "test_step", "predict_step", "validation_epoch_end",
                   "test_epoch_end", "on_validation_", "on_test_", "on_predict_",
                   "validation_step_end", "test_step_end")
_LIGHTNING_PACKAGES = {"lightning", "pytorch_lightning", "lightning_bolts", "pl_bolts"}
_NAMES_ALWAYS_BOUND = set(dir(builtins)) | {
    "__file__", "__name__", "__doc__", "__spec__", "__path__", "__builtins__",
    "get_ipython", "display", "__loader__", "__package__", "__annotations__",
}


@dataclass(frozen=True, slots=True)
class Ctx:
    """Where a node runs. ``loops`` are the enclosing loops of the current function
    (outermost first); ``ifs`` the ``if`` statements entered since the innermost loop."""

    func: Func | None = None
    cls: ast.ClassDef | None = None
    loops: tuple[Loop, ...] = ()
    grad_off: bool = False
    ifs: tuple[ast.AST, ...] = ()  # ``ast.If`` and ``ast.ExceptHandler`` nodes


def grad_mode_of(expr: ast.AST) -> bool | None:
    """True when a ``with`` item or decorator switches autograd off, False when on."""
    call = expr if isinstance(expr, ast.Call) else None
    name = dotted(call.func if call else expr)
    if name in _GRAD_OFF_CALLS:
        if call and call.args and isinstance(call.args[0], ast.Constant):
            return not call.args[0].value if name.endswith("inference_mode") else None
        return True
    if name.endswith("set_grad_enabled") and call and call.args:
        arg = call.args[0]
        return (arg.value is False) if isinstance(arg, ast.Constant) else None
    if name.endswith("enable_grad"):
        return False
    return None


def is_lightning_eval_hook(func: Func, cls: ast.ClassDef | None, lightning: bool = True) -> bool:
    """A Lightning hook that Lightning itself runs under ``no_grad``. ``lightning`` says
    whether the file uses Lightning at all: a hand-written trainer's ``validation_step``
    gets no such help."""
    if cls is None or not func.name.startswith(_LIGHTNING_EVAL):
        return False
    return lightning or any("Lightning" in dotted(b) for b in cls.bases)


def _top_level_imports(body: list[ast.stmt]) -> list[ast.Import | ast.ImportFrom]:
    """Imports at module level, also inside ``try``/``if`` (optional imports)."""
    found: list[ast.Import | ast.ImportFrom] = []
    for stmt in body:
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            found.append(stmt)
        elif isinstance(stmt, (ast.Try, ast.If)):
            found += _top_level_imports(stmt.body + stmt.orelse)
    return found


def uses_lightning(tree: ast.Module) -> bool:
    """The file imports Lightning, or imports nothing at all (an excerpt of a module)."""
    imports = _top_level_imports(tree.body)
    if not imports:
        return True
    for node in imports:
        names = [a.name for a in node.names] if isinstance(node, ast.Import) \
            else [node.module or ""]
        if any(n.split(".")[0] in _LIGHTNING_PACKAGES for n in names):
            return True
    return False


@dataclass
class ModuleIndex:
    tree: ast.Module
    calls: list[tuple[ast.Call, Ctx]] = field(default_factory=list)
    augassigns: list[tuple[ast.AugAssign, Ctx]] = field(default_factory=list)
    assigns: list[tuple[ast.Assign | ast.AnnAssign, Ctx]] = field(default_factory=list)
    funcs: list[tuple[Func, Ctx]] = field(default_factory=list)
    classes: list[ast.ClassDef] = field(default_factory=list)
    stmt_ctx: dict[ast.stmt, Ctx] = field(default_factory=dict)
    parent: dict[ast.stmt, tuple[ast.AST, str]] = field(default_factory=dict)
    imports: list[ast.Import | ast.ImportFrom] = field(default_factory=list)
    expr_calls: set[int] = field(default_factory=set)  # calls whose result is dropped
    with_calls: set[int] = field(default_factory=set)  # calls used as ``with`` items
    bound: set[str] = field(default_factory=set)
    star_import: bool = False
    _step_loop: dict[int, bool] = field(default_factory=dict)
    cache: dict[object, object] = field(default_factory=dict)  # for rule helpers

    # -- names ---------------------------------------------------------------------
    def is_undefined(self, name: str) -> bool:
        """A name never bound in this file: the source is an excerpt, context unknown."""
        return not self.star_import and name not in self.bound and name not in _NAMES_ALWAYS_BOUND

    # -- loops ---------------------------------------------------------------------
    def is_step_loop(self, loop: Loop) -> bool:
        """A loop that runs once per training/eval step (or contains such a loop)."""
        key = id(loop)
        if key not in self._step_loop:
            from torchleak.check.steps import looks_like_step_loop

            self._step_loop[key] = looks_like_step_loop(loop)
        return self._step_loop[key]

    def innermost_step_loop(self, ctx: Ctx) -> Loop | None:
        for loop in reversed(ctx.loops):
            if self.is_step_loop(loop):
                return loop
        return None

    def is_batch_loop(self, loop: Loop) -> bool:
        """A step loop with no step loop inside: its body runs once per batch."""
        from torchleak.check.astutil import walk_local

        if not self.is_step_loop(loop):
            return False
        key = ("batch", id(loop))
        if key not in self.cache:
            self.cache[key] = not any(isinstance(n, LOOPS) and self.is_step_loop(n)
                                      for n in walk_local(loop))
        return bool(self.cache[key])

    def calls_in(self, func: ast.AST | None) -> list[tuple[ast.Call, Ctx]]:
        """The calls whose innermost function is ``func`` (``None``: module level)."""
        by_func = self.cache.get("calls_by_func")
        if not isinstance(by_func, dict):
            by_func = {}
            for call, ctx in self.calls:
                by_func.setdefault(id(ctx.func), []).append((call, ctx))
            self.cache["calls_by_func"] = by_func
        return by_func.get(id(func), [])

    def block_of(self, stmt: ast.stmt) -> list[ast.stmt] | None:
        entry = self.parent.get(stmt)
        if entry is None:
            return None
        body = getattr(entry[0], entry[1], None)
        return body if isinstance(body, list) else None


class _Indexer:
    def __init__(self, index: ModuleIndex) -> None:
        self.index = index
        self.lightning = uses_lightning(index.tree)

    def block(self, stmts: list[ast.stmt], ctx: Ctx, owner: ast.AST, fieldname: str) -> None:
        for stmt in stmts:
            self.index.parent[stmt] = (owner, fieldname)
            self.stmt(stmt, ctx)
            if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
                mode = grad_mode_of(stmt.value) if dotted(stmt.value.func).endswith(
                    "set_grad_enabled") else None
                if mode is not None:
                    ctx = Ctx(ctx.func, ctx.cls, ctx.loops, mode, ctx.ifs)

    def stmt(self, node: ast.stmt, ctx: Ctx) -> None:
        idx = self.index
        idx.stmt_ctx[node] = ctx
        if isinstance(node, FUNCS):
            self.function(node, ctx)
            return
        if isinstance(node, ast.ClassDef):
            idx.classes.append(node)
            idx.bound.add(node.name)
            self.exprs(node.bases + node.decorator_list, ctx)
            self.block(node.body, Ctx(None, node, (), False, ()), node, "body")
            return
        if isinstance(node, ast.AugAssign):
            idx.augassigns.append((node, ctx))
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            idx.assigns.append((node, ctx))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            idx.imports.append(node)
            self.imports(node)
        elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
            idx.expr_calls.add(id(node.value))
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            idx.bound.update(node.names)
        inner = ctx
        if isinstance(node, LOOPS):
            inner = Ctx(ctx.func, ctx.cls, ctx.loops + (node,), ctx.grad_off, ())
        elif isinstance(node, (ast.With, ast.AsyncWith)):
            idx.with_calls.update(id(i.context_expr) for i in node.items)
            modes = [grad_mode_of(item.context_expr) for item in node.items]
            mode = next((m for m in modes if m is not None), None)
            if mode is not None:
                inner = Ctx(ctx.func, ctx.cls, ctx.loops, mode, ctx.ifs)
        for name in node._fields:
            value = getattr(node, name, None)
            if type(value) is list and value and isinstance(value[0], ast.stmt):
                sub = inner
                if isinstance(node, ast.If) and name in ("body", "orelse"):
                    sub = Ctx(inner.func, inner.cls, inner.loops, inner.grad_off,
                              inner.ifs + (node,))
                if isinstance(node, LOOPS) and name == "orelse":
                    sub = ctx
                self.block(value, sub, node, name)
            elif isinstance(value, list):
                for item in value:
                    if isinstance(item, ast.excepthandler):
                        if item.name:
                            idx.bound.add(item.name)
                        if item.type is not None:
                            self.exprs([item.type], ctx)
                        handler = Ctx(inner.func, inner.cls, inner.loops, inner.grad_off,
                                      inner.ifs + (item,))
                        self.block(item.body, handler, item, "body")
                    elif isinstance(item, ast.match_case):
                        self.exprs([item.pattern], ctx)
                        self.block(item.body, inner, item, "body")
                    elif isinstance(item, ast.AST):
                        self.exprs([item], ctx)
            elif isinstance(value, ast.AST):
                self.exprs([value], ctx)

    def function(self, node: ast.FunctionDef | ast.AsyncFunctionDef, ctx: Ctx) -> None:
        idx = self.index
        idx.funcs.append((node, ctx))
        idx.bound.add(node.name)
        self.exprs(node.decorator_list + [node.args], ctx)
        grad_off = is_lightning_eval_hook(node, ctx.cls, self.lightning)
        for deco in node.decorator_list:
            mode = grad_mode_of(deco)
            if mode is not None:
                grad_off = mode
        self.block(node.body, Ctx(node, ctx.cls, (), grad_off, ()), node, "body")

    def exprs(self, nodes: list[ast.AST], ctx: Ctx) -> None:
        # The hot loop of the checker: plain attribute access, no generators.
        idx = self.index
        calls, bound = idx.calls, idx.bound
        stack = list(nodes)
        pop, push, extend = stack.pop, stack.append, stack.extend
        while stack:
            node = pop()
            kind = type(node)
            if kind is ast.Call:
                calls.append((node, ctx))
            elif kind is ast.Name:
                if type(node.ctx) is not ast.Load:
                    bound.add(node.id)
                continue
            elif kind is ast.Constant:
                continue
            elif kind is ast.arg:
                bound.add(node.arg)
            elif kind is ast.MatchAs or kind is ast.MatchStar:
                if node.name:
                    bound.add(node.name)
            for name in node._fields:
                value = getattr(node, name, None)
                if type(value) is list:
                    extend(v for v in value if isinstance(v, ast.AST))
                elif isinstance(value, ast.AST):
                    push(value)

    def imports(self, node: ast.Import | ast.ImportFrom) -> None:
        for alias in node.names:
            if alias.name == "*":
                self.index.star_import = True
            else:
                self.index.bound.add(alias.asname or alias.name.split(".")[0])


def build_index(tree: ast.Module) -> ModuleIndex:
    index = ModuleIndex(tree)
    _Indexer(index).block(tree.body, Ctx(), tree, "body")
    return index


def callee(call: ast.Call) -> str:
    return last_name(call.func)
