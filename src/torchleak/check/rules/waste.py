"""TL302-TL304: patterns that waste memory (or time) every step without leaking."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from torchleak.check.astutil import dotted, last_name, names_in, walk_local
from torchleak.check.context import Ctx
from torchleak.check.rules.base import Analysis, Finding, Rule
from torchleak.check.steps import is_model_function, is_step_function


def batch_level(a: Analysis, ctx: Ctx) -> bool:
    """Runs once per batch: inside the innermost step loop or in a ``*_step`` function."""
    loop = a.index.innermost_step_loop(ctx)
    if loop is not None:
        return a.index.is_batch_loop(loop)
    return not ctx.loops and is_step_function(ctx.func) and not is_model_function(ctx.func)


def _unconditional(a: Analysis, ctx: Ctx) -> bool:
    """No guard between the loop and the call, other than "is CUDA there?"."""
    for node in ctx.ifs:
        if not isinstance(node, ast.If):
            return False  # an ``except`` handler: recovering from an OOM is fine
        test = a.segment(node.test).lower()
        if not any(w in test for w in ("cuda", "gpu", "device", "available")):
            return False
    return True


class EmptyCachePerStep(Rule):
    """## What it does
    Finds `torch.cuda.empty_cache()` running unconditionally every batch (an
    `if torch.cuda.is_available():` guard still counts as every batch).

    ## Why is this bad?
    It frees nothing that is still referenced and makes the next step pay for `cudaMalloc`
    again: slower training, no memory saved.

    Not reported: every-N-steps guards, OOM `except` handlers, per-epoch calls, calls placed
    between the phases of one step on purpose (several per step, or right after `del`, as
    when a colocated inference engine shares the GPU).

    ## Example
    ```python
    for batch in loader:
        loss = model(batch); loss.backward(); optimizer.step()
        torch.cuda.empty_cache()
    ```

    Use instead:
    ```python
    for step, batch in enumerate(loader):
        ...
        if step % 500 == 0:
            torch.cuda.empty_cache()
    ```

    ## Fix safety
    No fix.
    """

    code = "TL302"
    name = "empty-cache-per-step"
    summary = "`torch.cuda.empty_cache()` is called unconditionally every step."

    def check(self, a: Analysis) -> Iterator[Finding]:
        for call, ctx in a.index.calls:
            if dotted(call.func).endswith("cuda.empty_cache") and batch_level(a, ctx) \
                    and _unconditional(a, ctx) and not _between_phases(a, ctx, call):
                yield Finding(call, "`torch.cuda.empty_cache()` every step frees nothing "
                                    "that is still referenced and forces slow cudaMalloc "
                                    "calls on the next step; remove it, or call it every "
                                    "N steps or after evaluation")


def _between_phases(a: Analysis, ctx: Ctx, call: ast.Call) -> bool:
    """Several calls in one step, or one right after ``del``: memory handed back between
    the phases of a step on purpose (to a colocated inference engine, say)."""
    calls = [c for c, _ in a.index.calls_in(ctx.func)
             if dotted(c.func).endswith("cuda.empty_cache")]
    if len(calls) > 1:
        return True
    stmt = next((s for s in a.index.stmt_ctx if getattr(s, "value", None) is call), None)
    block = a.index.block_of(stmt) if stmt is not None else None
    if not block:
        return False
    at = block.index(stmt)
    return at > 0 and isinstance(block[at - 1], ast.Delete)


_HEAVY_EXACT = {"SummaryWriter", "GradScaler"}


class ObjectConstructedPerStep(Rule):
    """## What it does
    Finds a loss module (`nn.CrossEntropyLoss()`), an optimizer or a `GradScaler` constructed
    in every batch, or a `SummaryWriter` (which starts a writer thread and a file) in every
    epoch.

    ## Why is this bad?
    The object is rebuilt every time: wasted time and allocations, and for a writer a thread
    and an open file per epoch.

    Not reported: constructions whose arguments change every step (per-batch class weights),
    losses built inside a model's `forward` or a `compute_loss` override.

    ## Example
    ```python
    for x, y in loader:
        criterion = nn.CrossEntropyLoss()
        loss = criterion(model(x), y)
    ```

    Use instead:
    ```python
    criterion = nn.CrossEntropyLoss()
    for x, y in loader:
        loss = criterion(model(x), y)
    ```

    ## Fix safety
    No fix.
    """

    code = "TL303"
    name = "object-constructed-per-step"
    summary = "A loss module, optimizer or writer is constructed inside the training loop."

    def check(self, a: Analysis) -> Iterator[Finding]:
        for call, ctx in a.index.calls:
            name = last_name(call.func)
            if not name or not name[0].isupper():
                continue
            full = dotted(call.func)
            kind = self._kind(name, full)
            if kind is None or ctx.grad_off and kind == "loss":
                continue
            loop = a.index.innermost_step_loop(ctx)
            per = (loop is not None) if kind == "writer" else batch_level(a, ctx)
            # Under a guard (``if step in (60, 120)``, ``if epoch == 0``) it is built now
            # and then, not every step.
            if per and _unconditional(a, ctx) and self._invariant(a, call, ctx, loop):
                yield Finding(call, f"`{name}(...)` builds a new {kind} object every "
                                    f"{'epoch' if kind == 'writer' else 'step'}; construct "
                                    f"it once before the loop and reuse it")

    @staticmethod
    def _kind(name: str, full: str) -> str | None:
        if name.endswith("Loss"):
            return "loss"
        if name == "SummaryWriter":
            return "writer"
        if name in _HEAVY_EXACT:
            return "scaler"
        if full.startswith(("torch.optim.", "optim.")) and "lr_scheduler" not in full:
            return "optimizer"
        return None

    @staticmethod
    def _invariant(a: Analysis, call: ast.Call, ctx: Ctx, loop: ast.AST | None) -> bool:
        """Arguments that change per step (class weights per batch) justify it."""
        used = names_in(call) - {"self", "torch", "nn", "optim", last_name(call.func)}
        if loop is not None:
            local: set[str] = set()
            for node in walk_local(loop):
                if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
                    local.add(node.id)
            return not used & local
        return not used & set(a.taint.facts(ctx.func).defs)


class DefaultTensorTypeCuda(Rule):
    """## What it does
    Finds `torch.set_default_tensor_type('torch.cuda.FloatTensor')` or
    `torch.set_default_device("cuda")`.

    ## Why is this bad?
    Every new tensor, also inside DataLoader workers, lands on the GPU, so each worker
    creates its own CUDA context (hundreds of MiB each).

    ## Example
    ```python
    torch.set_default_tensor_type('torch.cuda.FloatTensor')
    ```

    Use instead:
    ```python
    x = torch.zeros(3, device=device)   # pass devices explicitly
    ```

    ## Fix safety
    No fix.
    """

    code = "TL304"
    name = "default-device-cuda"
    summary = "The default tensor type or device is set to CUDA globally."

    def check(self, a: Analysis) -> Iterator[Finding]:
        for call, _ctx in a.index.calls:
            name = last_name(call.func)
            if name not in ("set_default_tensor_type", "set_default_device") or not call.args:
                continue
            if _mentions_cuda(call.args[0]):
                yield Finding(call, f"`{name}` to CUDA makes every new tensor (also in "
                                    f"DataLoader workers) a CUDA tensor, so each worker "
                                    f"creates its own CUDA context; remove it and move "
                                    f"tensors with `.to(device)` explicitly")


def _mentions_cuda(node: ast.AST) -> bool:
    for sub in ast.walk(node):
        if isinstance(sub, ast.Constant) and isinstance(sub.value, str) \
                and "cuda" in sub.value.lower():
            return True
        if isinstance(sub, ast.Attribute) and sub.attr == "cuda":
            return True
    return False
