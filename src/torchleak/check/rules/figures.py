"""TL104: matplotlib figures created over and over and never closed."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from torchleak.check.astutil import dotted, is_const, keyword, last_name, walk_local
from torchleak.check.context import Ctx
from torchleak.check.diagnostic import SAFE, UNSAFE, Edit, Fix
from torchleak.check.rules.base import Analysis, Finding, Rule
from torchleak.check.steps import is_epoch_function, is_step_function

_CREATE = {"figure", "subplots", "subplot_mosaic"}
_CLOSING = {"close", "clf", "show", "add_figure", "log_figure"}
_FRESH = {"figure", "subplots", "close", "subplot_mosaic"}  # make a new figure or close
_CLOSE_OK = {"plt.close", "pyplot.close"}


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
    statement of the block that creates the figure. It is safe only when the figure
    provably has no later use: it is not passed to any call or stored under another name,
    and nothing that runs after the close (later in the function, earlier in an enclosing
    loop's next pass, or in a caller of this module after the call) uses pyplot, calls
    `savefig` (a `PdfPages`' included), writes to a PDF, names the figure, or calls a
    function of this module that might draw or save pyplot's current figure. Otherwise it
    is unsafe and its help line says why (`plt.savefig(...)` after the loop, or a helper
    that saves the current figure, would write a blank image).
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
    why = used_after_close(a, owner, stmt, ctx, mod, arg)
    if why:
        return Fix(f"Add `{mod}.close({arg})` (unsafe: {why})",
                   (Edit(end, col, end, col, text),), UNSAFE)
    return Fix(f"Add `{mod}.close({arg})`", (Edit(end, col, end, col, text),), SAFE)


def used_after_close(a: Analysis, owner: ast.AST, created: ast.stmt, ctx: Ctx, mod: str,
                     fig: str) -> str:
    """Why closing the figure at the end of ``owner`` may blank a later use; ``""`` when
    nothing can use it after: it is not handed to other code, and nothing that runs later
    (after the block, in an enclosing loop, or in a caller after the call) draws, saves or
    calls a helper of this module."""
    for node in _nodes_after(owner, created):
        why = _escapes(node, fig, mod)
        if why:
            return why
    scope = ctx.func or a.index.tree
    region = ctx.loops[0] if ctx.loops else owner
    later = [n for n in walk_local(scope) if _outside(n, owner) and (
        getattr(n, "lineno", 0) > (getattr(owner, "end_lineno", 0) or 0) or _inside(n, region))]
    why = _later_use(a, later, mod, fig)
    if why or ctx.func is None:
        return why
    for call, call_ctx in a.index.calls:  # does a caller of this module draw after the call?
        if _calls(call, ctx):
            caller = call_ctx.func or a.index.tree
            after = [n for n in walk_local(caller) if getattr(n, "lineno", 0) > call.lineno]
            why = _later_use(a, after, mod, "")
            if why:
                return f"after `{ctx.func.name}()` returns, {why}"
    return ""


def _calls(call: ast.Call, ctx: Ctx) -> bool:
    """``call`` runs ``ctx.func``: ``plot(...)``, or ``self.plot(...)`` for a method."""
    name = ctx.func.name if ctx.func is not None else ""
    if ctx.cls is None:
        return isinstance(call.func, ast.Name) and call.func.id == name
    return isinstance(call.func, ast.Attribute) and call.func.attr == name \
        and dotted(call.func.value) == "self"


def _nodes_after(owner: ast.AST, created: ast.stmt) -> list[ast.AST]:
    body: list[ast.stmt] = getattr(owner, "body", [])
    found: list[ast.AST] = []
    for stmt in body:
        if stmt.lineno > created.lineno:
            found.append(stmt)
            found.extend(walk_local(stmt))
    return found


def _escapes(node: ast.AST, fig: str, mod: str) -> str:
    """The figure is handed to code that may keep it: a call argument or a stored value."""
    if not fig:
        return ""
    if isinstance(node, ast.Call):
        args = list(node.args) + [k.value for k in node.keywords]
        if any(isinstance(x, ast.Name) and x.id == fig for x in args):
            name = dotted(node.func) or last_name(node.func)
            if not (name.startswith(f"{mod}.") or name in _CLOSE_OK):
                return f"`{fig}` is passed to `{name or 'a call'}`, which may keep it and " \
                       f"draw or save it later"
    if isinstance(node, ast.Assign) and isinstance(node.value, ast.Name) \
            and node.value.id == fig:
        return f"`{fig}` is also stored as `{dotted(node.targets[0]) or 'another name'}`"
    return ""


def _later_use(a: Analysis, nodes: list[ast.AST], mod: str, fig: str) -> str:
    helpers = {f.name for f, _ctx in a.index.funcs}
    for node in sorted((n for n in nodes if hasattr(n, "lineno")),
                       key=lambda n: (n.lineno, n.col_offset)):  # type: ignore[attr-defined]
        line = node.lineno  # type: ignore[attr-defined]
        if isinstance(node, ast.Name) and fig and node.id == fig:
            return f"`{fig}` is used on line {line}"
        if not isinstance(node, ast.Call):
            continue
        name = dotted(node.func)
        if fig and isinstance(node.func, ast.Attribute) and dotted(node.func.value) == fig:
            return f"`{fig}` is used on line {line}"
        if name.startswith(f"{mod}.") and last_name(node.func) not in _FRESH:
            return f"`{name}()` on line {line} would find the figure closed"
        if last_name(node.func) == "savefig":
            return f"`{name or 'savefig'}()` on line {line} saves pyplot's current figure"
        if last_name(node.func) == "PdfPages" or "pdf" in name.lower():
            return f"`{name}()` on line {line} writes figures to a PDF"
        if isinstance(node.func, ast.Name) and node.func.id in helpers:
            return f"`{node.func.id}()` on line {line} runs later and may draw or save " \
                   f"pyplot's current figure"
        if isinstance(node.func, ast.Attribute) and dotted(node.func.value) == "self" \
                and node.func.attr in helpers:
            return f"`self.{node.func.attr}()` on line {line} runs later and may draw or " \
                   f"save pyplot's current figure"
    return ""


def _outside(node: ast.AST, owner: ast.AST) -> bool:
    return not _inside(node, owner)


def _inside(node: ast.AST, region: ast.AST) -> bool:
    line = getattr(node, "lineno", 0)
    return region.lineno <= line <= (getattr(region, "end_lineno", 0) or 0)  # type: ignore[attr-defined]
