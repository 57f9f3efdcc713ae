"""TL104: matplotlib figures created over and over and never closed."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from torchleak.check.astutil import dotted, is_const, keyword, last_name, walk_local
from torchleak.check.context import Ctx
from torchleak.check.diagnostic import SAFE, UNSAFE, Edit, Fix
from torchleak.check.fixsafety import draws_after
from torchleak.check.rules.base import Analysis, Finding, Rule
from torchleak.check.steps import is_epoch_function, is_step_function

_CREATE = {"figure", "subplots", "subplot_mosaic"}
_CLOSING = {"close", "clf", "show", "add_figure", "log_figure"}


def pyplot_aliases(a: Analysis) -> tuple[set[str], set[str]]:
    """Module aliases of ``matplotlib.pyplot`` and names imported from it."""
    modules, names = {"plt", "pyplot", "matplotlib.pyplot"}, set()
    for node in a.index.imports:
        if isinstance(node, ast.Import):
            for al in node.names:
                if al.name == "matplotlib.pyplot" and al.asname:
                    modules.add(al.asname)
        elif node.module == "matplotlib":
            modules.update(al.asname or al.name for al in node.names if al.name == "pyplot")
        elif node.module == "matplotlib.pyplot":
            names.update(al.asname or al.name for al in node.names if al.name in _CREATE)
    return modules, names


def calls_by_scope(a: Analysis) -> dict[int, list[tuple[ast.Call, Ctx]]]:
    cached = getattr(a, "_calls_by_scope", None)
    if cached is None:
        cached = {}
        for call, ctx in a.index.calls:
            cached.setdefault(id(ctx.func), []).append((call, ctx))
        a._calls_by_scope = cached  # type: ignore[attr-defined]
    return cached


class FigureNotClosed(Rule):
    """## What it does
    Finds `plt.figure()`/`plt.subplots()` inside a loop or in a per-step / per-epoch hook in
    a function that never closes the figure.

    ## Why is this bad?
    pyplot keeps every figure it creates (and its canvas) alive until it is closed, so each
    epoch adds megabytes.

    Not reported: `plt.close(...)`, `fig.clf()`, `plt.show()`, `writer.add_figure(...)`
    (closes by default) in the same function, figures that are returned or kept on purpose,
    `plt.figure(1)` (reuses one figure).

    ## Example
    ```python
    def on_validation_epoch_end(self):
        for i, name in enumerate(dim_names):
            plt.figure(figsize=(8, 8))
            plt.scatter(preds[:, i], targets[:, i])
            plt.savefig(f"{name}.png")
    ```

    Use instead:
    ```python
            fig = plt.figure(figsize=(8, 8))
            plt.scatter(preds[:, i], targets[:, i])
            plt.savefig(f"{name}.png")
            plt.close(fig)
    ```

    ## Fix safety
    The fix inserts `plt.close(fig)` (or `plt.close()` for an unnamed figure) as the last
    statement of the block that creates the figure. It is safe when nothing after that block
    uses the figure or pyplot's current figure. It is unsafe when code after the loop still
    draws or saves (`plt.savefig(...)` after the loop would write a blank image).
    """

    code = "TL104"
    fix_availability = "sometimes"
    name = "figure-not-closed"
    summary = "A matplotlib figure is created in a loop or per-epoch hook and never closed."

    def check(self, a: Analysis) -> Iterator[Finding]:
        modules, names = pyplot_aliases(a)
        for call, ctx in a.index.calls:
            full = dotted(call.func)
            mod, _, attr = full.rpartition(".")
            if not ((mod in modules and attr in _CREATE) or (not mod and full in names)):
                continue
            if call.args or keyword(call, "num") is not None:
                continue  # ``plt.figure(1)`` reuses one figure
            if not (ctx.loops or is_epoch_function(ctx.func) or is_step_function(ctx.func)):
                continue
            if self._closed_or_escapes(a, ctx, call):
                continue
            yield Finding(call, f"`{full}()` opens a new figure every time it runs and it is "
                                f"never closed, so pyplot keeps them all; call "
                                f"`{mod or 'plt'}.close(fig)` after saving or logging it",
                          _fix(a, call, ctx, mod or "plt"))

    @staticmethod
    def _closed_or_escapes(a: Analysis, ctx: Ctx, call: ast.Call) -> bool:
        key = ("closes", id(ctx.func))
        if key not in a.index.cache:
            a.index.cache[key] = any(_closes(other)
                                     for other, _ in calls_by_scope(a).get(id(ctx.func), []))
        if a.index.cache[key]:
            return True
        scope = ctx.func or a.index.tree
        figs = _figure_names(scope, call)
        for node in walk_local(scope):
            if isinstance(node, (ast.Return, ast.Yield)) and node.value is not None:
                if figs & {n.id for n in ast.walk(node.value) if isinstance(n, ast.Name)}:
                    return True  # the caller owns the figure
            elif isinstance(node, ast.Call) and dotted(node.func).endswith(".append"):
                if any(isinstance(x, ast.Name) and x.id in figs for x in node.args):
                    return True  # kept on purpose, closed by whoever holds the list
        return False


def _closes(call: ast.Call) -> bool:
    name = last_name(call.func)
    if name == "add_figure":
        return not is_const(keyword(call, "close"), False)
    return name in _CLOSING


def _figure_names(scope: ast.AST, call: ast.Call) -> set[str]:
    for node in walk_local(scope):
        if isinstance(node, ast.Assign) and node.value is call:
            return {n.id for n in ast.walk(node.targets[0]) if isinstance(n, ast.Name)}
    return set()


def _fix(a: Analysis, call: ast.Call, ctx: Ctx, mod: str) -> Fix | None:
    """Insert ``plt.close(fig)`` as the last statement of the block creating the figure."""
    owner: ast.AST | None = ctx.loops[-1] if ctx.loops else ctx.func
    if owner is None:
        return None
    body: list[ast.stmt] = owner.body  # type: ignore[attr-defined]
    stmt = next((s for s in body if getattr(s, "value", None) is call), None)
    if stmt is None or body[0].lineno == owner.lineno:
        return None
    if any(isinstance(n, (ast.Return, ast.Continue, ast.Break, ast.Raise, ast.Yield))
           for s in body for n in [s, *walk_local(s)]):
        return None
    target = stmt.targets[0] if isinstance(stmt, ast.Assign) else None
    if isinstance(target, ast.Tuple) and target.elts:
        target = target.elts[0]
    arg = target.id if isinstance(target, ast.Name) else ""
    last = body[-1]
    end = last.end_lineno or last.lineno
    indent = a.lines[stmt.lineno - 1][: a.char_col(stmt.lineno, stmt.col_offset)]
    if indent.strip():
        return None
    col = len(a.lines[end - 1]) + 1
    text = f"\n{indent}{mod}.close({arg})"
    later = draws_after(a, owner, mod, arg, ctx.func or a.index.tree)
    return Fix(f"Add `{mod}.close({arg})`", (Edit(end, col, end, col, text),),
               UNSAFE if later else SAFE)
