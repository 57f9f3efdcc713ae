"""What counts as "once per training step": step loops and per-step functions.

A checker that flags every loop drowns real code in noise (``for layer in self.layers``
is not a training loop), so a loop is a *step loop* only when it iterates over data
or its body does a backward pass / optimizer step.
"""

from __future__ import annotations

import ast
import re

from torchleak.check.astutil import FUNCS, dotted, last_name, tokens, walk_local

_DATA_WORDS = {"loader", "dataloader", "dl", "batches", "dataset", "iterator", "minibatches"}
_DATA_NAME = re.compile(r"(loader|batches|dataset|data_iter|train_data|val_data|test_data)$",
                        re.IGNORECASE)
_BACKWARD_CALLS = {"backward", "manual_backward"}
_OPTIM_STEP_RECEIVER = re.compile(r"(optim|opt$|optimizer|^opt_|scaler)", re.IGNORECASE)

# Per-step functions: Lightning step hooks and callbacks (``on_train_batch_end``), Hugging
# Face ``Trainer`` overrides (``compute_loss``, ``training_step``, ``prediction_step``) and
# ``TrainerCallback`` hooks (``on_step_end``), ``train_step`` helpers, ``forward``.
_STEP_FUNC = re.compile(
    r"^_*(\w+_step|forward|on_\w*batch_(start|end)|on_(before|after)_(backward|"
    r"optimizer_step|zero_grad)|train_(one_)?batch|train_on_batch|training_step_end|"
    r"compute_loss|on_step_(begin|end)|on_substep_end)$")
# Per-step functions whose callees are not per-step by themselves: a model's ``forward``
# calls its layers' helpers, ``compute_loss`` its loss pieces.
_MODEL_FUNC = re.compile(r"^_*(forward|compute_loss)$")
_EPOCH_FUNC = re.compile(r"^_*(on_\w*epoch_(start|end)|\w*_epoch_end)$")


def is_data_iterable(expr: ast.AST) -> bool:
    """``train_loader``, ``enumerate(tqdm(dl))``, ``self.val_dataloader()``, ``batches``."""
    for node in ast.walk(expr):
        name = ""
        if isinstance(node, ast.Name):
            name = node.id
        elif isinstance(node, ast.Attribute):
            name = node.attr
        if name and (_DATA_NAME.search(name) or set(tokens(name)) & _DATA_WORDS):
            return True
    return False


def is_backward_call(call: ast.Call) -> bool:
    name = last_name(call.func)
    if name in _BACKWARD_CALLS:
        return True
    return dotted(call.func) in ("torch.autograd.backward", "autograd.backward")


def is_optimizer_step(call: ast.Call) -> bool:
    func = call.func
    if not isinstance(func, ast.Attribute) or func.attr not in ("step", "zero_grad"):
        return False
    receiver = last_name(func.value) or dotted(func.value)
    return bool(_OPTIM_STEP_RECEIVER.search(receiver))


def looks_like_step_loop(loop: ast.For | ast.AsyncFor | ast.While) -> bool:
    if isinstance(loop, (ast.For, ast.AsyncFor)) and is_data_iterable(loop.iter):
        return True
    for node in walk_local(loop):
        if isinstance(node, ast.Call) and (is_backward_call(node) or is_optimizer_step(node)):
            return True
    return False


def is_step_function(func: ast.AST | None) -> bool:
    return isinstance(func, FUNCS) and bool(_STEP_FUNC.match(func.name))


def is_epoch_function(func: ast.AST | None) -> bool:
    return isinstance(func, FUNCS) and bool(_EPOCH_FUNC.match(func.name))


def is_model_function(func: ast.AST | None) -> bool:
    """``forward``/``compute_loss``: per step, but model code rather than loop code."""
    return isinstance(func, FUNCS) and bool(_MODEL_FUNC.match(func.name))


def per_step_decorator(func: ast.AST) -> bool:
    """``@trainer.on(Events.ITERATION_COMPLETED)`` (ignite): runs after every iteration."""
    for deco in getattr(func, "decorator_list", ()):
        if isinstance(deco, ast.Call) and last_name(deco.func) == "on":
            # ``Events.ITERATION_COMPLETED(every=100)`` is a call: periodic, not per step
            if any(isinstance(arg, ast.Attribute) and arg.attr.startswith("ITERATION_")
                   for arg in deco.args):
                return True
    return False
