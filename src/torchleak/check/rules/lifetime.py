"""TL103/TL202: lists on ``self`` that grow every step and are never trimmed."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from torchleak.check.astutil import dotted, is_const, tokens
from torchleak.check.attr_growth import GROW, Growth, attr_of, fragment_self, growth
from torchleak.check.containers import attr_kind
from torchleak.check.context import Ctx
from torchleak.check.roles import runs_per_step
from torchleak.check.rules.base import Analysis, Finding, Rule
from torchleak.check.steps import is_step_function

_HOOK_FOR = {"training": "on_train_epoch_end", "train": "on_train_epoch_end",
             "validation": "on_validation_epoch_end", "val": "on_validation_epoch_end",
             "test": "on_test_epoch_end", "predict": "on_predict_epoch_end"}
_STOP_FLAGS = {"should_stop", "should_training_stop"}
_HISTORY_WORDS = {"history", "hist", "records", "log", "logs", "trace", "buffer"}


class StepOutputsNotCleared(Rule):
    """## What it does
    Finds `self.<x>_step_outputs` (or an `*outputs` list appended in a `*_step` method) that
    grows every step and that nothing clears, trims, re-creates or bounds.

    ## Why is this bad?
    The list keeps every epoch's outputs. Lightning 2.x removed the automatic
    `validation_epoch_end(outputs)` and left clearing the list to you.

    Not reported: lists cleared or re-assigned anywhere outside `__init__`, length-guarded
    appends, `deque(maxlen=...)`.

    ## Example
    ```python
    def validation_step(self, batch, batch_idx):
        self.validation_step_outputs.append(self(batch).detach().cpu())

    def on_validation_epoch_end(self):
        preds = torch.cat(self.validation_step_outputs)
    ```

    Use instead:
    ```python
    def on_validation_epoch_end(self):
        preds = torch.cat(self.validation_step_outputs)
        self.validation_step_outputs.clear()
    ```

    ## Fix safety
    No fix: where the list should be cleared depends on where it is read.
    """

    code = "TL103"
    name = "step-outputs-not-cleared"
    summary = "`*_step_outputs` is appended every step but never cleared at epoch end."

    def check(self, a: Analysis) -> Iterator[Finding]:
        g = growth(a)
        for attr, sites in g.appends.items():
            for call, ctx in sites:
                if outputs_never_cleared(a, call, ctx):
                    hook = _HOOK_FOR.get(attr.split("_")[0], "the matching on_*_epoch_end")
                    yield Finding(call, f"`{attr}` grows every step and is never cleared, "
                                        f"so it keeps every epoch's outputs; call "
                                        f"`self.{attr}.clear()` at the end of `{hook}`")


class UnboundedHistory(Rule):
    """## What it does
    Finds a list on `self` appended every step (inside the batch loop, or in
    `training_step`/`forward`/`on_train_batch_end`/`on_step_end` and helpers they call) that
    nothing in the class ever trims, clears, re-creates or length-checks (a
    `grad_norm_history`). A user class that wraps the list is followed within the module.

    ## Why is this bad?
    The history grows by one entry per step for the whole run: a slow leak that shows after
    days, not minutes.

    Not reported: per-epoch and every-N-steps histories (`if step % N == 0`), bounded
    `deque(maxlen=...)`, a wrapper class of the same module that is bounded (a
    `ReplayBuffer` around `deque(maxlen=capacity)`) or trims itself, containers handed in
    from outside (their owner may clear them), callbacks that stop the run themselves (a
    learning-rate finder). A value that carries a graph is reported as TL102 as well:
    detaching it does not stop the growth.

    ## Example
    ```python
    self.grad_norm_history = []
    ...
    for batch in loader:
        ...
        self.grad_norm_history.append(float(norm))
    ```

    Use instead:
    ```python
    self.grad_norm_history = collections.deque(maxlen=100)
    ```

    ## Fix safety
    No fix: how much history to keep is yours to choose.
    """

    code = "TL202"
    name = "unbounded-history"
    summary = "A history list on `self` is appended every step and never bounded."

    def check(self, a: Analysis) -> Iterator[Finding]:
        g = growth(a)
        for attr, sites in g.appends.items():
            if attr.endswith("outputs"):
                continue
            for call, ctx in sites:
                if grows_every_step(a, call, ctx):
                    yield Finding(call, f"`self.{attr}` grows by one entry every step and "
                                        f"is never trimmed; use `collections.deque(maxlen=N)` "
                                        f"or clear it at epoch end")
        yield from self._fragment_inits(a, g)

    def _fragment_inits(self, a: Analysis, g: Growth) -> Iterator[Finding]:
        """An excerpt that only shows ``self.x_history = []``: nothing bounds it."""
        if not a.index.is_undefined("self"):
            return
        for node, ctx in a.index.assigns:
            t = node.targets[0] if isinstance(node, ast.Assign) else node.target
            if (ctx.func is None and isinstance(t, ast.Attribute) and fragment_self(a, t)
                    and isinstance(node.value, ast.List) and not node.value.elts
                    and set(tokens(t.attr)) & _HISTORY_WORDS
                    and (0, t.attr) not in g.bounded and t.attr not in g.appends):
                yield Finding(node, f"`self.{t.attr}` is a history list with no bound; use "
                                    f"`collections.deque(maxlen=N)` or trim it when appending")


def outputs_never_cleared(a: Analysis, call: ast.Call, ctx: Ctx) -> bool:
    """TL103's sites: ``self.<x>_step_outputs.append(...)`` that nothing clears."""
    attr = attr_of(call.func.value) if isinstance(call.func, ast.Attribute) else ""
    if not attr or call.func.attr not in GROW or growth(a).is_bounded(attr, ctx):  # type: ignore[attr-defined]
        return False
    return attr.endswith("step_outputs") or (attr.endswith("outputs")
                                             and is_step_function(ctx.func))


def grows_every_step(a: Analysis, call: ast.Call, ctx: Ctx) -> bool:
    """``self.x.append(v)`` every step on a plain list nothing bounds (TL202's sites; a
    value with a graph is reported by TL102 as well, since detaching it leaves the growth)."""
    attr = attr_of(call.func.value) if isinstance(call.func, ast.Attribute) else ""
    if not attr or attr.endswith("outputs") or call.func.attr not in GROW:  # type: ignore[attr-defined]
        return False
    g = growth(a)
    if g.is_bounded(attr, ctx) or not _on_self(call) or not _per_step(a, ctx, attr, call) \
            or _finite_run(a, ctx.cls):
        return False
    return fragment_self(a, call.func) or \
        attr_kind(a, ctx.cls, attr, call.func.attr) == "list"  # type: ignore[attr-defined]


def _on_self(call: ast.Call) -> bool:
    value = call.func.value if isinstance(call.func, ast.Attribute) else None
    if isinstance(value, ast.Subscript):
        value = value.value
    return isinstance(value, ast.Attribute) and dotted(value.value) == "self"


def _finite_run(a: Analysis, cls: ast.ClassDef | None) -> bool:
    """A callback that stops training itself (``trainer.should_stop = True``, as a
    learning-rate finder does) records a run of its own, finite length."""
    if cls is None:
        return False
    stopping = a.index.cache.get("stopping_classes")
    if not isinstance(stopping, set):
        stopping = {id(ctx.cls) for n, ctx in a.index.assigns
                    if isinstance(n, ast.Assign) and is_const(n.value, True)
                    and any(isinstance(t, ast.Attribute) and t.attr in _STOP_FLAGS
                            for t in n.targets)}
        a.index.cache["stopping_classes"] = stopping
    return id(cls) in stopping


def _has_modulo(test: ast.AST) -> bool:
    return any(isinstance(n, ast.BinOp) and isinstance(n.op, ast.Mod) for n in ast.walk(test))


def _periodic(ctx: Ctx, call: ast.Call) -> bool:
    """Under ``if step % N == 0``, or after ``if step % N: return``: every N steps."""
    if any(isinstance(node, ast.If) and _has_modulo(node.test) for node in ctx.ifs):
        return True
    body = ctx.loops[-1].body if ctx.loops else getattr(ctx.func, "body", [])
    for stmt in body:
        if stmt.lineno >= call.lineno:
            break
        if isinstance(stmt, ast.If) and _has_modulo(stmt.test) and stmt.body \
                and isinstance(stmt.body[-1], (ast.Return, ast.Continue)):
            return True
    return False


def runs_per_sample(ctx: Ctx) -> bool:
    """``Dataset.__getitem__``: runs for every sample of every epoch (in every worker)."""
    return ctx.func is not None and ctx.func.name == "__getitem__" and ctx.cls is not None \
        and any("Dataset" in dotted(b) for b in ctx.cls.bases)


def _per_step(a: Analysis, ctx: Ctx, attr: str, call: ast.Call) -> bool:
    if _periodic(ctx, call):
        return False
    for loop in reversed(ctx.loops):
        if a.index.is_step_loop(loop):
            return a.index.is_batch_loop(loop)
    if ctx.loops:
        return False
    if runs_per_step(a.index, ctx.func) or runs_per_sample(ctx):
        return True
    # An excerpt at module level: only a name that says "history" is enough.
    return (ctx.func is None and a.index.is_undefined("self")
            and bool(set(tokens(attr)) & _HISTORY_WORDS))


