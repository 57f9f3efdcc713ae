"""TL301: evaluation code that runs the model with autograd on."""

from __future__ import annotations

import ast
import os
from collections.abc import Iterator

from torchleak.check.astutil import last_name, tokens, walk_local
from torchleak.check.context import Ctx, Func, grad_mode_of, is_lightning_eval_hook
from torchleak.check.diagnostic import SAFE, UNSAFE, Edit, Fix
from torchleak.check.fixsafety import returns_graph
from torchleak.check.rules.base import Analysis, Finding, Rule
from torchleak.check.steps import is_backward_call, is_data_iterable, is_optimizer_step
from torchleak.check.taint import is_source_call

_EVAL_WORDS = {"eval", "evaluate", "evaluation", "validate", "validation", "val", "valid",
               "test", "testing", "inference", "infer", "predict"}
_GRAD_WORDS = ("grad", "no_grad", "inference_mode", "set_grad_enabled", "requires_grad_",
               "enable_grad", "backward", "manual_backward")


class EvalWithoutNoGrad(Rule):
    """## What it does
    Finds a function named like evaluation (`evaluate`, `validate`, `val_epoch`, `test`,
    `inference`, `predict` ...) that runs a model over a data loader with autograd on.

    ## Why is this bad?
    Every forward keeps its activations for a backward that never comes: evaluation takes
    far more memory than it needs.

    Not reported: `@torch.no_grad()`/`@torch.inference_mode()` or `with` blocks, functions
    that call `backward` or touch grad settings, Lightning hooks (`validation_step` already
    runs under no_grad), functions called under `no_grad` in the same file, `test_*` in test
    files.

    ## Example
    ```python
    def evaluate(model, val_loader):
        model.eval()
        for x, y in val_loader:
            out = model(x)
    ```

    Use instead:
    ```python
    @torch.no_grad()
    def evaluate(model, val_loader):
        ...
    ```

    ## Fix safety
    The fix adds `@torch.no_grad()` directly above the `def`. It is safe when the function
    returns nothing that may carry a graph (only numbers, or nothing); it is unsafe when it
    returns tensors a caller might still backpropagate through.
    """

    code = "TL301"
    fix_availability = "sometimes"
    name = "eval-without-no-grad"
    summary = "Evaluation/validation code runs the model without `no_grad`/`inference_mode`."

    def check(self, a: Analysis) -> Iterator[Finding]:
        called_off = {last_name(c.func) for c, ctx in a.index.calls if ctx.grad_off}
        test_file = os.path.basename(a.path).startswith("test_") or "/tests/" in a.path
        for func, ctx in a.index.funcs:
            words = set(tokens(func.name))
            if not words & _EVAL_WORDS or func.name in called_off:
                continue
            if is_lightning_eval_hook(func, ctx.cls) or func.name.startswith("on_"):
                continue
            if test_file and func.name.startswith("test"):
                continue
            if any(grad_mode_of(d) is not None for d in func.decorator_list):
                continue
            forward = self._forward_in_data_loop(a, func)
            if forward is not None:
                yield Finding(func, f"`{func.name}` runs the model over a data loader with "
                                    f"autograd on, so every forward keeps its activations "
                                    f"for a backward that never comes; decorate it with "
                                    f"`@torch.no_grad()` or wrap the loop in "
                                    f"`with torch.inference_mode():`", _fix(a, func))

    @staticmethod
    def _forward_in_data_loop(a: Analysis, func: Func) -> ast.Call | None:
        found: ast.Call | None = None
        for node in walk_local(func):
            if isinstance(node, ast.Call):
                name = last_name(node.func)
                if name in _GRAD_WORDS or is_backward_call(node) or is_optimizer_step(node):
                    return None
            elif isinstance(node, ast.Attribute) and node.attr == "requires_grad":
                return None
        for call, ctx in a.index.calls:
            if ctx.func is func and _model_call(call) and _in_data_loop(ctx) \
                    and not ctx.grad_off:
                found = found or call
        return found


def _model_call(call: ast.Call) -> bool:
    if not is_source_call(call):
        return False
    words = tokens(last_name(call.func)) or ["self"]
    return not {"loss", "criterion", "entropy", "kl"} & set(words) and \
        not words[-1].endswith("loss")


def _in_data_loop(ctx: Ctx) -> bool:
    return any(isinstance(loop, (ast.For, ast.AsyncFor)) and is_data_iterable(loop.iter)
               for loop in ctx.loops)


def _fix(a: Analysis, func: Func) -> Fix | None:
    """``@torch.no_grad()`` right above ``def``: below other decorators, so it wraps the
    plain function (above ``@staticmethod`` it would change how the method binds)."""
    if "torch" not in a.index.bound:
        return None
    line = func.lineno
    indent = a.lines[line - 1][: a.char_col(line, func.col_offset)]
    if indent.strip():
        return None
    at = len(indent) + 1
    return Fix("Add `@torch.no_grad()`",
               (Edit(line, at, line, at, f"@torch.no_grad()\n{indent}"),),
               UNSAFE if returns_graph(a, func) else SAFE)
