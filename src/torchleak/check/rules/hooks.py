"""TL105: module hooks registered every step with their handles thrown away."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator

from torchleak.check.astutil import last_name, root_name, walk_local
from torchleak.check.context import Ctx
from torchleak.check.rules.base import Analysis, Finding, Rule
from torchleak.check.rules.figures import calls_by_scope
from torchleak.check.steps import is_step_function

_REGISTER = re.compile(r"^register_(module_)?(forward|forward_pre|full_backward|backward|"
                       r"full_backward_pre)_hook$")
_CAM = re.compile(r"^[A-Z]\w*CAM\w*$")  # GradCAM, ScoreCAM, GradCAMPlusPlus ...


def per_step(a: Analysis, ctx: Ctx) -> bool:
    return a.index.innermost_step_loop(ctx) is not None or is_step_function(ctx.func)


class HookRegisteredPerStep(Rule):
    """## What it does
    Finds `register_forward_hook`/`register_*_hook` on a module inside the training loop, in
    `forward` or in a per-step method, with the handle thrown away or never `.remove()`d;
    also Grad-CAM style helpers (`GradCAM(...)`) created per batch outside a `with`.

    ## Why is this bad?
    Hooks pile up on the module, each holding what its closure captured, and all of them run
    on every forward.

    Not reported: registration once at setup, handles that are removed, hooks on a module
    created in the same iteration, tensor `register_hook` (dies with the tensor).

    ## Example
    ```python
    for x, y in loader:
        model.layer4.register_forward_hook(save_activation)
        loss = model(x).sum()
    ```

    Use instead:
    ```python
    handle = model.layer4.register_forward_hook(save_activation)
    for x, y in loader:
        loss = model(x).sum()
    handle.remove()
    ```

    ## Fix safety
    No fix: where the hook belongs is a design decision.
    """

    code = "TL105"
    name = "hook-registered-per-step"
    summary = "A module hook is registered every step and its handle is never removed."

    def check(self, a: Analysis) -> Iterator[Finding]:
        for call, ctx in a.index.calls:
            name = last_name(call.func)
            if _REGISTER.match(name) and per_step(a, ctx) and not self._removed(a, ctx, call):
                yield Finding(call, f"`{name}` runs every step and the hook is never "
                                    f"removed, so hooks (and what they capture) pile up; "
                                    f"register it once, or keep the handle and call "
                                    f"`handle.remove()` after the step")
            elif (_CAM.match(name) and id(call) not in a.index.with_calls
                  and per_step(a, ctx) and not self._removed(a, ctx, call)):
                yield Finding(call, f"`{name}(...)` is created every step and registers "
                                    f"hooks on the model that are never removed; create it "
                                    f"once outside the loop or use it as `with {name}(...)`")

    @staticmethod
    def _removed(a: Analysis, ctx: Ctx, call: ast.Call) -> bool:
        if _receiver_made_per_step(a, ctx, call):
            return True  # hooks on a module created this iteration die with it
        if id(call) in a.index.expr_calls:
            return False  # the handle is dropped on the floor
        for other, _ in calls_by_scope(a).get(id(ctx.func), []):
            if last_name(other.func) in ("remove", "release", "remove_hooks", "__exit__"):
                return True
        if ctx.cls is not None:
            for node in ast.walk(ctx.cls):
                if isinstance(node, ast.Call) and last_name(node.func) in ("remove",
                                                                           "remove_hooks"):
                    return True
        return False


def _receiver_made_per_step(a: Analysis, ctx: Ctx, call: ast.Call) -> bool:
    """``layer = next(m for m in model.modules() ...)`` or ``model = Model()`` inside the
    loop: every iteration hooks a fresh module."""
    loop = a.index.innermost_step_loop(ctx)
    root = root_name(call.func)
    if loop is None or not root or root == "self":
        return False
    return any(isinstance(n, ast.Name) and n.id == root and isinstance(n.ctx, ast.Store)
               for n in walk_local(loop))
