"""TL108, TL109, TL110: torch's and the interpreter's own state, kept for the whole loop."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from torchleak.check.astutil import LOOPS, dotted, is_const, keyword, last_name
from torchleak.check.rules.base import Analysis, Finding, Rule
from torchleak.check.rules.waste import batch_level


def _step_loop_inside(a: Analysis, body: list[ast.stmt]) -> bool:
    """A training (step) loop runs inside these statements."""
    return any(isinstance(node, LOOPS) and a.index.is_step_loop(node)  # type: ignore[arg-type]
               for stmt in body for node in ast.walk(stmt))


def _with_blocks(a: Analysis) -> Iterator[tuple[ast.With, ast.Call]]:
    for node in ast.walk(a.index.tree):
        if isinstance(node, ast.With):
            for item in node.items:
                if isinstance(item.context_expr, ast.Call):
                    yield node, item.context_expr


class LoopInsideAutocast(Rule):
    """## What it does
    Finds a training loop that runs inside one `torch.autocast(...)` block (or
    `torch.cuda.amp.autocast()`/`torch.amp.autocast(...)`) with its cast cache on.

    ## Why is this bad?
    Autocast caches the lower-precision copy of every tensor that requires grad until
    the outermost autocast block exits. For the weights that is one copy each; but a
    tensor made to require grad every step (an adversarial input, a noise leaf) is a new
    entry every step, and the block never exits while training runs.

    ## Example
    ```python
    with torch.autocast("cuda", dtype=torch.bfloat16):
        for x, y in loader:
            x = x.requires_grad_(True)
            loss = loss_fn(model(x), y)
            ...
    ```

    Use instead:
    ```python
    for x, y in loader:
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = loss_fn(model(x.requires_grad_(True)), y)
        ...
    ```

    ## Fix safety
    No fix: where the block should start and end is a choice about the loop's code
    (`cache_enabled=False` keeps the block but recasts the weights at every use).
    """

    code = "TL108"
    name = "loop-inside-autocast"
    summary = "A training loop runs inside one autocast block, whose cast cache never clears."

    def check(self, a: Analysis) -> Iterator[Finding]:
        for block, call in _with_blocks(a):
            if last_name(call.func) != "autocast" or is_const(keyword(call, "cache_enabled"),
                                                               False):
                continue
            if _step_loop_inside(a, block.body):
                yield Finding(call, "the whole training loop runs inside this autocast block: "
                                    "its cast cache keeps a cast copy of every tensor that "
                                    "requires grad until the block exits (a new input made to "
                                    "require grad is a new entry every step); enter autocast "
                                    "per step, around the forward pass and the loss, or pass "
                                    "`cache_enabled=False`")


class ProfilerWithoutSchedule(Rule):
    """## What it does
    Finds `torch.profiler.profile(...)` with no `schedule=` around a training loop: as a
    `with` block that holds the loop, or started with `.start()` before it.

    ## Why is this bad?
    The profiler keeps every operator's events in memory until it stops: over a whole
    training run that grows every step.

    ## Example
    ```python
    with torch.profiler.profile() as prof:
        for x, y in loader:
            ...
    ```

    Use instead:
    ```python
    schedule = torch.profiler.schedule(wait=1, warmup=1, active=3)
    with torch.profiler.profile(schedule=schedule, on_trace_ready=handler) as prof:
        for x, y in loader:
            ...
            prof.step()
    ```

    ## Fix safety
    No fix: which steps to profile is the user's choice.
    """

    code = "TL109"
    name = "profiler-without-schedule"
    summary = "The profiler records a whole training loop (no schedule), keeping every event."

    def check(self, a: Analysis) -> Iterator[Finding]:
        for block, call in _with_blocks(a):
            if self._unscheduled(call) and _step_loop_inside(a, block.body):
                yield Finding(call, self._message())
        for call, ctx in a.index.calls:
            func = call.func
            if not (isinstance(func, ast.Attribute) and func.attr == "start"
                    and id(call) in a.index.expr_calls):
                continue
            started = self._profile_call(a, func.value)
            stmt = next((s for s, c in a.index.stmt_ctx.items()
                         if isinstance(s, ast.Expr) and s.value is call), None)
            body = a.index.block_of(stmt) if stmt is not None else None
            if started is None or not self._unscheduled(started) or body is None:
                continue
            after = body[body.index(stmt) + 1:] if stmt in body else []
            if _step_loop_inside(a, after):
                yield Finding(call, self._message())

    @staticmethod
    def _unscheduled(call: ast.Call) -> bool:
        return dotted(call.func).endswith("profiler.profile") and keyword(call, "schedule") is None

    @staticmethod
    def _profile_call(a: Analysis, target: ast.AST) -> ast.Call | None:
        """The ``profile(...)`` call a name was assigned from."""
        if not isinstance(target, ast.Name):
            return None
        for node, _ctx in a.index.assigns:
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) and any(
                    isinstance(t, ast.Name) and t.id == target.id for t in node.targets):
                return node.value
        return None

    @staticmethod
    def _message() -> str:
        return ("the profiler records the whole training loop and keeps every operator's "
                "events until it stops; profile a few steps: `schedule=torch.profiler."
                "schedule(wait=1, warmup=1, active=3)` with `on_trace_ready` and "
                "`prof.step()` each step")


class WarningMessagePerStep(Rule):
    """## What it does
    Finds `warnings.warn(...)` in a training step whose message is built from values
    (an f-string, `%` or `.format`).

    ## Why is this bad?
    Python records each distinct warning message, per code location, in the calling
    module's `__warningregistry__` so that it is shown once, even when warnings are
    routed to logging or nobody reads them. A message with the step, a loss or a count
    in it is new every step: the registry grows for the whole run.

    ## Example
    ```python
    for step, batch in enumerate(loader):
        if clipped:
            warnings.warn(f"step {step}: clipped {value:.3f}")
    ```

    Use instead:
    ```python
    for step, batch in enumerate(loader):
        if clipped:
            logger.warning("step %d: clipped %.3f", step, value)
    ```

    ## Fix safety
    No fix: a logger call or a constant message changes what is printed.
    """

    code = "TL110"
    name = "warning-message-per-step"
    summary = "A warning whose message carries per-step values: one registry entry a step."

    def check(self, a: Analysis) -> Iterator[Finding]:
        for call, ctx in a.index.calls:
            if dotted(call.func) not in ("warnings.warn", "warn") or not call.args:
                continue
            if dotted(call.func) == "warn" and a.index.is_undefined("warn"):
                continue
            if _built(call.args[0]) and batch_level(a, ctx):
                yield Finding(call, "this warning's message carries values that change every "
                                    "step: each distinct message is kept in the module's "
                                    "`__warningregistry__` for the whole run (even when the "
                                    "warning is hidden); log the values instead "
                                    "(`logger.warning('... %s', value)`) or keep the message "
                                    "constant")


def _built(message: ast.AST) -> bool:
    """A message made from values at run time."""
    if isinstance(message, ast.JoinedStr):
        return any(isinstance(v, ast.FormattedValue) for v in message.values)
    if isinstance(message, ast.BinOp) and isinstance(message.op, (ast.Mod, ast.Add)):
        return True
    return isinstance(message, ast.Call) and isinstance(message.func, ast.Attribute) and \
        message.func.attr == "format"
