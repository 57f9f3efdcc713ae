"""What each function of a module is for, found from names and from the calls between
functions of the same module:

* **per step**: runs once per training or evaluation step: a framework hook
  (``training_step``, ``compute_loss``, ``on_train_batch_end``, ``on_step_end``), or a helper
  called unconditionally from a step loop or from such a hook (``self._eval_batch(batch)``).
* **evaluation**: runs a model to evaluate it (named so, calls ``model.eval()``, or is called
  from such a function) and never trains (no backward, no optimizer step). There, results of
  calls the checker cannot see into may carry a graph when autograd is on.
"""

from __future__ import annotations

import ast
import os
from dataclasses import dataclass, field

from torchleak.check.astutil import last_name, tokens, walk_local
from torchleak.check.context import Ctx, Func, ModuleIndex, grad_mode_of
from torchleak.check.steps import (
    is_backward_call,
    is_epoch_function,
    is_model_function,
    is_optimizer_step,
    is_step_function,
    per_step_decorator,
)

EVAL_WORDS = {"eval", "evaluate", "evaluation", "validate", "validation", "val", "valid",
              "test", "testing", "inference", "infer", "predict"}
_TRAINING_CALLS = {"no_grad", "inference_mode", "set_grad_enabled", "enable_grad",
                   "requires_grad_", "grad", "zero_grad", "manual_backward"}
_RUN_WORDS = {"run", "do", "perform", "full"}
_ROUNDS = 3  # helpers of helpers of helpers: deep enough for real code, cheap


@dataclass
class Roles:
    per_step: set[int] = field(default_factory=set)
    evaluation: set[int] = field(default_factory=set)
    called_under_no_grad: set[str] = field(default_factory=set)
    # functions of this module whose every call site runs with autograd off (a helper of
    # Lightning's ``validation_step``): their bodies run without building graphs
    grad_off_only: set[int] = field(default_factory=set)


def roles(index: ModuleIndex) -> Roles:
    cached = index.cache.get("roles")
    if isinstance(cached, Roles):
        return cached
    found = _Resolver(index).run()
    index.cache["roles"] = found
    return found


def runs_per_step(index: ModuleIndex, func: ast.AST | None) -> bool:
    return func is not None and id(func) in roles(index).per_step


def grad_off(index: ModuleIndex, ctx: Ctx) -> bool:
    """Autograd is off here: a ``no_grad`` block, or a helper only ever called from one."""
    return ctx.grad_off or (ctx.func is not None and id(ctx.func) in roles(index).grad_off_only)


def in_evaluation(index: ModuleIndex, ctx: Ctx) -> bool:
    """The statement runs model evaluation code with autograd on."""
    return (ctx.func is not None and not ctx.grad_off
            and id(ctx.func) in roles(index).evaluation)


class _Resolver:
    def __init__(self, index: ModuleIndex) -> None:
        self.index = index
        self.module_funcs: dict[str, Func] = {}
        self.methods: dict[tuple[int, str], Func] = {}
        for func, ctx in index.funcs:
            if ctx.func is None and ctx.cls is None:
                self.module_funcs[func.name] = func
            elif ctx.func is None and ctx.cls is not None:
                self.methods[(id(ctx.cls), func.name)] = func
        self.test_file = _is_test_file(index)

    def run(self) -> Roles:
        r = Roles()
        r.called_under_no_grad = {last_name(c.func) for c, ctx in self.index.calls
                                  if ctx.grad_off}
        for func, ctx in self.index.funcs:
            if (is_step_function(func) and not is_epoch_function(func)) \
                    or per_step_decorator(func):
                r.per_step.add(id(func))
            if self._evaluates(func, ctx, r):
                r.evaluation.add(id(func))
        r.grad_off_only = self._grad_off_only()
        for _ in range(_ROUNDS):
            before = len(r.per_step) + len(r.evaluation)
            self._propagate(r)
            if len(r.per_step) + len(r.evaluation) == before:
                break
        return r

    def _propagate(self, r: Roles) -> None:
        index = self.index
        for call, ctx in index.calls:
            callee = self.resolve(call, ctx)
            if callee is None or callee is ctx.func:
                continue
            if ctx.ifs == () and self._call_site_per_step(ctx, r):
                r.per_step.add(id(callee))
            if ctx.func is not None and id(ctx.func) in r.evaluation and not ctx.grad_off \
                    and self._may_evaluate(callee, r):
                r.evaluation.add(id(callee))

    def _grad_off_only(self) -> set[int]:
        sites: dict[int, list[bool]] = {}
        for call, ctx in self.index.calls:
            callee = self.resolve(call, ctx)
            if callee is not None and callee is not ctx.func:
                sites.setdefault(id(callee), []).append(ctx.grad_off)
        return {key for key, offs in sites.items() if all(offs)}

    def _call_site_per_step(self, ctx: Ctx, r: Roles) -> bool:
        loop = self.index.innermost_step_loop(ctx)
        if loop is not None:
            return self.index.is_batch_loop(loop)
        if ctx.loops or ctx.func is None or is_model_function(ctx.func):
            return False
        return id(ctx.func) in r.per_step

    def resolve(self, call: ast.Call, ctx: Ctx) -> Func | None:
        """The function of this module that ``call`` runs, when it can be told."""
        func = call.func
        if isinstance(func, ast.Name):
            return self.module_funcs.get(func.id)
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) \
                and func.value.id == "self" and ctx.cls is not None:
            return self.methods.get((id(ctx.cls), func.attr))
        return None

    def _evaluates(self, func: Func, ctx: Ctx, r: Roles) -> bool:
        if self.test_file and func.name.startswith("test"):
            return False
        body_ctx = self.index.stmt_ctx.get(func.body[0])
        if body_ctx is not None and body_ctx.grad_off:
            return False  # decorated, or a Lightning hook that Lightning runs under no_grad
        return (evaluation_name(func.name) or self._calls_eval_mode(func)) \
            and self._may_evaluate(func, r)

    def _calls_eval_mode(self, func: Func) -> bool:
        """``model.eval()`` (no arguments: ``something.eval(expr)`` is another method)."""
        return any(isinstance(c.func, ast.Attribute) and c.func.attr == "eval"
                   and not c.args and not c.keywords for c, _ in self.index.calls_in(func))

    def _may_evaluate(self, func: Func, r: Roles) -> bool:
        """Never trains, never switches grad mode, and not called under ``no_grad``."""
        if func.name in r.called_under_no_grad:
            return False
        key = ("may_evaluate", id(func))
        if key not in self.index.cache:
            self.index.cache[key] = self._never_trains(func)
        return bool(self.index.cache[key])

    @staticmethod
    def _never_trains(func: Func) -> bool:
        if any(grad_mode_of(d) is not None for d in func.decorator_list):
            return False
        for node in walk_local(func):
            if isinstance(node, ast.Call):
                if last_name(node.func) in _TRAINING_CALLS or is_backward_call(node) \
                        or is_optimizer_step(node):
                    return False
            elif isinstance(node, ast.Attribute) and node.attr == "requires_grad":
                return False
        return True


def evaluation_name(name: str) -> bool:
    """``evaluate``, ``val_epoch``, ``run_validation``; not ``_check_val`` or ``on_test_end``."""
    words = tokens(name)
    if words and words[0] in _RUN_WORDS:
        words = words[1:]
    return bool(words) and words[0] in EVAL_WORDS


def _is_test_file(index: ModuleIndex) -> bool:
    path = str(index.cache.get("path", ""))
    name = os.path.basename(path)
    return name.startswith("test_") or name.endswith("_test.py") \
        or f"{os.sep}tests{os.sep}" in path or "/tests/" in path

