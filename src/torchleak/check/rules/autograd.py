"""TL106, TL201, TL401: autograd switches that make every step keep more."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from torchleak.check.astutil import dotted, is_const, keyword, last_name, target_key
from torchleak.check.astutil import walk_local
from torchleak.check.context import Ctx, Loop
from torchleak.check.rules.base import Analysis, Finding, Rule
from torchleak.check.steps import is_backward_call
from torchleak.check.taint import is_source_call

_DEBUG_WORDS = ("debug", "anomaly", "detect")


class AnomalyDetectionLeftOn(Rule):
    """## What it does
    Finds `torch.autograd.set_detect_anomaly(True)` as a statement (or
    `Trainer(detect_anomaly=True)`).

    ## Why is this bad?
    Anomaly mode stays on for the whole run: every step runs slower (often several times),
    and while a graph is alive each of its nodes holds the Python traceback of the
    operation that made it, so the peak memory of a step is higher. It is not a leak: the
    tracebacks are freed with the graph, so memory does not grow from step to step (the
    code is in TL1 for history; codes never change).

    Not reported: `with torch.autograd.set_detect_anomaly(True):` (scoped), a non-literal
    switch (`set_detect_anomaly(args.debug)`), calls inside `if debug:`-style guards.

    ## Example
    ```python
    torch.autograd.set_detect_anomaly(True)
    ```

    Use instead:
    ```python
    torch.autograd.set_detect_anomaly(args.detect_anomaly)
    ```

    ## Fix safety
    No fix.
    """

    code = "TL106"
    name = "anomaly-detection-on"
    summary = ("Anomaly detection is switched on for the whole run (a slowdown and a "
               "per-node traceback, not a leak).")

    def check(self, a: Analysis) -> Iterator[Finding]:
        for call, ctx in a.index.calls:
            name = last_name(call.func)
            on = False
            if name == "set_detect_anomaly" and id(call) in a.index.expr_calls:
                arg = call.args[0] if call.args else keyword(call, "mode")
                on = is_const(arg, True)  # as a ``with`` item it is scoped: fine
            elif name == "Trainer":
                on = is_const(keyword(call, "detect_anomaly"), True)
            if on and not _under_debug_flag(a, ctx):
                yield Finding(call, "anomaly detection stays on for the whole run: every "
                                    "step is slower and each autograd node keeps a Python "
                                    "traceback until its graph is freed (a higher peak, not "
                                    "growth from step to step); enable it only while "
                                    "debugging")


def _under_debug_flag(a: Analysis, ctx: Ctx) -> bool:
    return any(isinstance(node, ast.If)
               and any(w in a.segment(node.test).lower() for w in _DEBUG_WORDS)
               for node in ctx.ifs)


def _retain_graph_calls(a: Analysis) -> Iterator[tuple[ast.Call, Ctx, Loop]]:
    for call, ctx in a.index.calls:
        if (is_backward_call(call) or dotted(call.func).endswith("autograd.grad")) and \
                is_const(keyword(call, "retain_graph"), True):
            loop = a.index.innermost_step_loop(ctx)
            if loop is not None:
                yield call, ctx, loop


def carried_state(loop: Loop) -> str:
    """A value fed to the model and re-bound from its output every iteration, never
    detached: ``out, hidden = model(x, hidden)``. Returns its name or ``""``."""
    fed: dict[str, int] = {}
    detached: set[str] = set()
    for node in walk_local(loop):
        if isinstance(node, ast.Assign):
            keys = [target_key(e) for t in node.targets
                    for e in (t.elts if isinstance(t, (ast.Tuple, ast.List)) else [t])]
            value = node.value
            if isinstance(value, ast.Call) and is_source_call(value):
                args = {target_key(x) for x in value.args} | {dotted(x) for x in value.args}
                for k in keys:
                    if k and k in args:
                        fed[k] = fed.get(k, 0) + 1
                        continue
                    detached.add(k)
            else:
                detached.update(keys)  # re-initialised or detached/repackaged
        elif isinstance(node, ast.Call) and last_name(node.func) in ("detach_", "zero_"):
            detached.add(target_key(node.func.value))  # type: ignore[attr-defined]
    return next((k for k in fed if k not in detached), "")


class RetainGraphWithCarriedState(Rule):
    """## What it does
    Finds `backward(retain_graph=True)` in a training loop where a state is fed back into the
    model every step without being detached (`out, hidden = model(x, hidden)`).

    ## Why is this bad?
    Each step's graph is chained to the previous one through the state, and with
    `retain_graph=True` none is ever freed.

    Not reported: states detached, repackaged or re-initialised each step. (Plain
    `retain_graph=True` without such a state is TL401.)

    ## Example
    ```python
    for x, y in loader:
        out, hidden = model(x, hidden)
        loss = criterion(out, y)
        loss.backward(retain_graph=True)
    ```

    Use instead:
    ```python
    for x, y in loader:
        hidden = hidden.detach()
        out, hidden = model(x, hidden)
        loss = criterion(out, y)
        loss.backward()
    ```

    ## Fix safety
    No fix: truncating backpropagation through time changes the training.
    """

    code = "TL201"
    name = "retain-graph-carried-state"
    summary = "`retain_graph=True` in a loop that carries a state from step to step."

    def check(self, a: Analysis) -> Iterator[Finding]:
        for call, _ctx, loop in _retain_graph_calls(a):
            state = carried_state(loop)
            if state:
                yield Finding(call, f"`retain_graph=True` with `{state}` carried into the "
                                    f"next step undetached chains every step's graph into "
                                    f"one that never frees; detach it each step "
                                    f"(`{state} = {state}.detach()`) and drop retain_graph")


class RetainGraphInLoop(Rule):
    """## What it does
    Finds `retain_graph=True` in a training loop without a carried state.

    ## Why is this bad?
    This step's graph is kept until the next backward; often legitimate (GAN
    discriminator/generator updates), worth a look when memory grows. Off by default: turn it
    on with `--extend-select TL4`.

    ## Example
    ```python
    for real in loader:
        errD = netD(real).mean() - netD(netG(noise)).mean()
        errD.backward(retain_graph=True)
    ```

    Use instead:
    ```python
    for real in loader:
        fake = netG(noise)
        errD = netD(real).mean() - netD(fake.detach()).mean()
        errD.backward()
    ```

    ## Fix safety
    No fix.
    """

    code = "TL401"
    name = "retain-graph-in-loop"
    summary = "`retain_graph=True` inside a training loop (noisy: GANs use it on purpose)."

    def check(self, a: Analysis) -> Iterator[Finding]:
        for call, _ctx, loop in _retain_graph_calls(a):
            if not carried_state(loop):
                yield Finding(call, "`retain_graph=True` inside the training loop keeps "
                                    "this step's graph until the next backward; make sure "
                                    "nothing carries it into later steps, or drop it")
