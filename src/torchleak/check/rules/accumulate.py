"""TL101/TL102: tensors that keep their autograd graph beyond the step that made them."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from torchleak.check.astutil import dotted, names_in, pos, root_name, target_key, tokens
from torchleak.check.astutil import walk_local
from torchleak.check.containers import is_bounded_deque, outlives_step, used_as_tensor_batch
from torchleak.check.context import Ctx
from torchleak.check.diagnostic import Fix
from torchleak.check.growth import site_at
from torchleak.check.fixsafety import (
    known_tensor,
    list_used_as_numbers,
    scalar_loss,
    used_as_number_only,
)
from torchleak.check.roles import grad_off, in_evaluation, runs_per_step
from torchleak.check.steps import is_data_iterable, is_optimizer_step
from torchleak.check.rules.base import Analysis, Finding, Rule, append_method_fix
from torchleak.check.taint import name_hints_tensor

_STORE_METHODS = {"append": 1, "extend": 1, "insert": 2, "appendleft": 1, "add": 1}
_METER_WORDS = {"meter", "meters", "avg", "average", "averager", "tracker", "losses", "stats"}


def _graph_value(a: Analysis, value: ast.AST, container: ast.AST, ctx: Ctx) -> bool | None:
    """True when ``value`` carries a graph into a container that outlives the step."""
    if ctx.grad_off and not isinstance(value, ast.Name):
        return False
    if not ctx.grad_off and grad_off(a.index, ctx):
        return False  # a helper that only runs under ``no_grad``
    lives = outlives_step(a, container, ctx)
    root = root_name(container)
    if lives is None:
        # An excerpt: the container is defined elsewhere, so judge by the names alone.
        if ctx.func is not None or ctx.loops or not a.index.is_undefined(root):
            return False
        if a.taint.carries_graph(value, ctx):
            return True
        return (isinstance(value, ast.Name) and a.index.is_undefined(value.id)
                and name_hints_tensor(value.id))
    if not lives:
        return False
    key = target_key(container)
    if a.taint.is_backwarded(key, ctx) or (root != "self" and a.taint.is_backwarded(root, ctx)):
        return False  # gradient accumulation / micro-batching: the graph is wanted
    return a.taint.carries_graph(value, ctx, opaque=in_evaluation(a.index, ctx))


def _scalar_like(a: Analysis, value: ast.AST, ctx: Ctx) -> bool:
    """A loss is a scalar, so ``.item()`` is safe on it."""
    name = dotted(value)
    if not name:
        return False
    return "loss" in tokens(name.split(".")[-1]) or a.taint.backward_called(name, ctx)


def _fix(a: Analysis, value: ast.AST, key: str, ctx: Ctx, site: ast.AST,
         accumulator: bool) -> Fix | None:
    """``.item()`` for scalar losses, ``.detach()`` otherwise; safe only when the change
    of type (or the value's being a tensor at all) cannot break later code."""
    if isinstance(value, (ast.Dict, ast.Tuple, ast.List, ast.Set, ast.Starred)):
        return None
    concatenated = isinstance(site, ast.Assign) and isinstance(site.value, ast.Call)
    if not concatenated and _scalar_like(a, value, ctx) and not used_as_tensor_batch(a, key):
        later_ok = used_as_number_only(a, key, ctx, site) if accumulator \
            else list_used_as_numbers(a, key, ctx)
        return append_method_fix(a, value, "item", scalar_loss(a, value, ctx) and later_ok)
    return append_method_fix(a, value, "detach", known_tensor(a, value, ctx))


class TensorAccumulated(Rule):
    """## What it does
    Finds a tensor that carries its autograd graph summed across loop iterations
    (`total += loss`, `total = total + loss`, `x = torch.cat([x, out])`).

    ## Why is this bad?
    The running sum is itself a tensor whose graph links every step's graph, so none of them
    is ever freed: memory grows every step until the process runs out.

    Not reported: `.item()`/`.detach()`/`float()` values, sums under `no_grad`, sums that are
    themselves backpropagated (gradient accumulation), accumulators reset every step, and a
    loss built from parts over heads or scales and returned for the caller's backward.

    ## Example
    ```python
    total_loss = 0
    for x, y in loader:
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
        total_loss += loss
    ```

    Use instead:
    ```python
        total_loss += loss.item()
    ```

    ## Fix safety
    The fix adds `.item()` to a scalar loss (one that `.backward()` is called on) or
    `.detach()` to a known tensor. It is safe when the total is only used as a number later
    (printed, formatted, divided, compared). It is unsafe when the total is later used as a
    tensor (`total_loss.item()`, `.backward()`, returned to a caller) or when the summed value
    may not be a tensor at all: `.item()` would change its type.
    """

    code = "TL101"
    fix_availability = "sometimes"
    name = "tensor-accumulated-with-graph"
    summary = "A tensor is summed across loop iterations without `.item()`/`.detach()`."

    def check(self, a: Analysis) -> Iterator[Finding]:
        for node, ctx in a.index.augassigns:
            if isinstance(node.op, (ast.Add, ast.Sub)) and not ctx.grad_off:
                yield from self._site(a, node.target, node.value, ctx, node)
        for node, ctx in a.index.assigns:
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and not ctx.grad_off:
                other = _self_referential(node.targets[0], node.value)
                if other is not None:
                    yield from self._site(a, node.targets[0], other, ctx, node)

    def _site(self, a: Analysis, target: ast.AST, value: ast.AST, ctx: Ctx,
              node: ast.AST) -> Iterator[Finding]:
        if _composed_loss(a, target, ctx) or not _graph_value(a, value, target, ctx):
            return
        key = target_key(target) or "the total"
        text = a.segment(value)
        fix = _fix(a, value, key, ctx, node, accumulator=True)
        how = "`.item()`" if fix and ".item()" in fix.message else "`.detach()`"
        yield Finding(node, f"`{key}` accumulates `{text}` with its autograd graph across "
                            f"iterations, so every step's graph stays alive; add {how} to "
                            f"`{text}`", fix)


def _composed_loss(a: Analysis, target: ast.AST, ctx: Ctx) -> bool:
    """``loss += w * head_loss`` over heads, scales or dims, then ``return loss``: one
    step's loss built from parts for the caller's backward, not a sum across steps."""
    loop = a.index.innermost_step_loop(ctx)
    key = target_key(target)
    if loop is None or ctx.func is None or not isinstance(target, ast.Name):
        return False
    if isinstance(loop, (ast.For, ast.AsyncFor)) and is_data_iterable(loop.iter):
        return False
    if any(isinstance(n, ast.Call) and is_optimizer_step(n) for n in walk_local(loop)):
        return False
    return any(isinstance(n, ast.Return) and n.value is not None
               and key in names_in(n.value) for n in walk_local(ctx.func))


def _self_referential(target: ast.AST, value: ast.AST) -> ast.AST | None:
    """``x = x + v`` or ``x = torch.cat([x, v])``: returns ``v``."""
    key = target_key(target)
    if not key or not isinstance(target, (ast.Name, ast.Attribute)):
        return None
    if isinstance(value, ast.BinOp) and isinstance(value.op, ast.Add):
        if dotted(value.left) == key:
            return value.right
        if dotted(value.right) == key:
            return value.left
    if isinstance(value, ast.Call) and dotted(value.func) in ("torch.cat", "torch.concat"):
        if value.args and isinstance(value.args[0], (ast.List, ast.Tuple)):
            elts = value.args[0].elts
            if len(elts) == 2 and dotted(elts[0]) == key:
                return elts[1]
    return None


class GraphTensorStored(Rule):
    """## What it does
    Finds a tensor that carries its graph (a model output, a loss, anything computed from
    them) stored in a list, dict, meter or attribute that outlives the step
    (`losses.append(loss)`, `outputs.append(model(x))`, `meter.update(loss)`,
    `cache[step] = out`, `self.step_losses.append(out.loss)` in a Hugging Face
    `compute_loss` override).

    Steps are training or evaluation loops, and the framework methods that run once per step:
    Lightning `training_step` and callbacks such as `on_train_batch_end`, Hugging Face
    `Trainer.compute_loss`/`training_step`/`prediction_step` overrides and
    `TrainerCallback.on_step_end`, and helpers called from them. In evaluation code that runs
    with autograd on (named like `evaluate`, calling `model.eval()`, or called from such a
    function), results of calls the checker cannot see into
    (`rgb, depth, acc = evaluator.create_samples(...)`) count as carrying a graph too.

    ## Why is this bad?
    The container keeps every step's graph (activations included) alive, so memory grows
    with every step or every evaluated batch.

    Not reported: values computed under `no_grad`/`inference_mode` (including Lightning
    `validation_step`), `.item()`/`.detach()` values, bounded `deque(maxlen=...)`, lists made
    anew every step, lists that are later backpropagated (micro-batching).

    ## Example
    ```python
    all_losses = []
    for batch in dataloader:
        loss = model(batch)
        all_losses.append(loss)
    ```

    Use instead:
    ```python
        all_losses.append(loss.item())
    ```

    ## Fix safety
    The fix adds `.item()` to a scalar loss or `.detach()` to a known tensor (add `.cpu()`
    yourself when values are only kept for metrics). It is safe when the list is only used as
    numbers later (`sum`, `len`, `np.mean`, `torch.tensor`, printing). It is unsafe when the
    list's elements are used as tensors later (`torch.stack`, tensor methods), or when the
    value's type is unknown (a model output can be a tuple or a dict; an unseen callee can
    return anything). Either way the fix only drops the graph: where the container also
    gains an entry every step and nothing bounds it, the message says so and that growth
    stays reported (TL107, TL202 or TL103) after the fix.
    """

    code = "TL102"
    fix_availability = "sometimes"
    name = "graph-tensor-stored"
    summary = ("A tensor that carries its autograd graph is stored in a list, dict or "
               "attribute that outlives the step.")

    def check(self, a: Analysis) -> Iterator[Finding]:
        for call, ctx in a.index.calls:
            func = call.func
            if not isinstance(func, ast.Attribute) or not call.args:
                continue
            container = func.value
            if func.attr in _STORE_METHODS:
                if len(call.args) != _STORE_METHODS[func.attr] or call.keywords:
                    continue  # ``functional.add(x, y)`` is arithmetic, not a store
                value = call.args[-1]
            elif func.attr == "update" and _is_meter(container):
                value = call.args[0]
            else:
                continue
            yield from self._site(a, call, container, value, ctx)
        for node, ctx in a.index.assigns:
            for target in getattr(node, "targets", [getattr(node, "target", None)]):
                if isinstance(target, ast.Subscript) and node.value is not None:
                    if _loop_variant_key(a, target, ctx):
                        yield from self._site(a, node, target.value, node.value, ctx)

    def _site(self, a: Analysis, node: ast.AST, container: ast.AST, value: ast.AST,
              ctx: Ctx) -> Iterator[Finding]:
        key = target_key(container)
        if not key or is_bounded_deque(a, key):
            return
        if not _graph_value(a, value, container, ctx):
            return
        text = a.segment(value)
        if len(text) > 40:
            text = text[:37] + "..."
        fix = _fix(a, value, key, ctx, node, accumulator=False)
        how = ("`.item()`" if fix and ".item()" in fix.message
               else "`.detach()` (and `.cpu()` if it is only kept for metrics)")
        if in_evaluation(a.index, ctx) and not a.taint.carries_graph(value, ctx):
            yield Finding(node, f"`{text}` comes from a call that runs with autograd on in "
                                f"evaluation code, so it may carry its graph into `{key}`, "
                                f"which keeps every iteration's graph alive; run the "
                                f"evaluation under `torch.no_grad()` or store it with "
                                f"`.detach()`", fix)
            return
        still = ""
        detaching = fix is None or ".item()" not in fix.message
        if (site_at(a, node) is not None and detaching) or _grows_on_self(a, node, ctx):
            still = (f"; that drops the graph, but `{key}` still gains an entry every step "
                     f"(see TL103/TL107/TL202)")
            fix = Fix(f"{fix.message} (the container still grows)", fix.edits,
                      fix.applicability) if fix is not None else None
        yield Finding(node, f"`{text}` is stored in `{key}` with its autograd graph and "
                            f"outlives the step, so every step's graph stays alive; store "
                            f"it with {how}{still}", fix)


def _grows_on_self(a: Analysis, node: ast.AST, ctx: Ctx) -> bool:
    """``self.x.append(v)`` that TL202 or TL103 reports as growing every step."""
    from torchleak.check.rules.lifetime import grows_every_step, outputs_never_cleared

    return isinstance(node, ast.Call) and (grows_every_step(a, node, ctx)
                                           or outputs_never_cleared(a, node, ctx))


def _is_meter(container: ast.AST) -> bool:
    name = dotted(container).split(".")[-1] if dotted(container) else ""
    return bool(name) and bool(set(tokens(name)) & _METER_WORDS)


def _loop_variant_key(a: Analysis, target: ast.Subscript, ctx: Ctx) -> bool:
    """``outputs[step] = out`` grows; ``state["last"] = out`` is overwritten."""
    loop = a.index.innermost_step_loop(ctx)
    if loop is None and not ctx.loops and runs_per_step(a.index, ctx.func):
        # a per-step hook: ``self.seen[self.global_step] = out`` gets a new key each step
        return not isinstance(target.slice, ast.Constant)
    if loop is None or not isinstance(loop, (ast.For, ast.AsyncFor)):
        return False
    loop_vars = {n.id for n in ast.walk(loop.target) if isinstance(n, ast.Name)}
    used = {n.id for n in ast.walk(target.slice) if isinstance(n, ast.Name)}
    return bool(loop_vars & used) and pos(target) > pos(loop)
