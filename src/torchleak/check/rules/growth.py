"""TL107: a long-lived container that gains something every step and is never bounded."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from torchleak.check.astutil import dotted, last_name
from torchleak.check.diagnostic import UNSAFE, Edit, Fix
from torchleak.check.growth import Site, growth_sites
from torchleak.check.growth_facts import stored_kind
from torchleak.check.rules.base import Analysis, Finding, Rule

_KEEP = 1000  # entries a bounded window keeps
_WHAT = {
    "graph": "a tensor with its autograd graph",
    "tensor": "a tensor",
    "array": "a NumPy array",
    "value": "a Python value",
    "object": "an entry",
}
_HOW_FAST = {
    "graph": "fast growth: each entry keeps that step's activations",
    "tensor": "grows by the tensor's size every step",
    "array": "grows by the array's size every step",
    "value": "slow growth, but without end",
    "object": "grows every step",
}


class ContainerGrowsEveryStep(Rule):
    """## What it does
    Finds a container that outlives the run (a module-level list or dict, a class
    attribute, an attribute of `self`, or a local of the training function made before the
    loop over epochs or steps) that gains something every training step (in the batch loop,
    `training_step`, an optimizer-step hook, a callback's batch hook or a `train_step`
    helper) and is never cleared, trimmed, bounded or re-made: `history.append(x)`,
    `cache[step] = out`, `x = torch.cat([x, out])`, `x = np.append(x, v)`,
    `log += f"..."`. The message says what each step adds: a tensor with its autograd
    graph (fastest: the step's activations stay alive), a tensor or array (its size every
    step) or a Python value (slow, but without end), and whether it happens many times per
    step.

    ## Why is this bad?
    Memory grows with every step for the whole run, until the process is killed. Detaching
    what is stored (TL102's fix) drops the graph but not the growth: the container still
    gets one more entry every step.

    Not reported: containers cleared, re-made, trimmed (`xs = xs[-100:]`, `pop`, `del`) or
    length-checked anywhere, bounded `deque(maxlen=...)`, lists made anew every epoch or
    every step, local lists filled over one pass of a data loader (bounded by the data
    set, freed when the function returns), dicts keyed by something that repeats (a sample
    index within an epoch, `step % N`, a name), additions every N steps
    (`if step % N == 0`), containers handed in from outside, and lists on `self` grown with
    `.append` (TL202 and TL103 report those).

    ## Example
    ```python
    history = []
    for epoch in range(epochs):
        for x, y in loader:
            loss = criterion(model(x), y)
            loss.backward()
            optimizer.step()
            history.append(loss.detach())
    ```

    Use instead:
    ```python
    history = []
    for epoch in range(epochs):
        for x, y in loader:
            ...
            history.append(loss.item())
        epoch_losses.append(sum(history) / len(history))
        history.clear()
    ```

    ## Fix safety
    When the growth happens inside a loop over epochs, the fix adds `history.clear()` as
    the last statement of that loop (the message names its line). Otherwise, for a list
    made as `history = []` and grown with `.append`, the fix makes it
    `collections.deque(maxlen=1000)` (adding `import collections` when needed). Both are
    always unsafe: code after the loop, or later in the epoch, may still read what was
    cleared or dropped (a plot of the whole run, a final average), and a deque cannot be
    sliced or passed to `torch.stack`. Dicts keyed by the step, rebinding
    (`torch.cat`, `np.append`, `+=`) and attributes of `self` get no fix: how much to
    keep (a window, a running mean, a file) is yours to choose. A fix that only detaches
    a stored value (TL102) does not remove this finding.
    """

    code = "TL107"
    fix_availability = "sometimes"
    name = "container-grows-every-step"
    summary = ("A long-lived list, dict, tensor or string gains something every step and is "
               "never cleared or bounded.")

    def check(self, a: Analysis) -> Iterator[Finding]:
        for site in growth_sites(a):
            yield Finding(site.node, message(a, site), _fix(a, site))


def message(a: Analysis, site: Site) -> str:
    kind = stored_kind(a, site.value, site.ctx) if site.kind != "cached" else _returns(a, site)
    what = _WHAT[kind]
    if site.kind == "rebind":
        if isinstance(site.node, ast.Assign) and isinstance(site.node.value, ast.Call):
            how = f"`{dotted(site.node.value.func)}` copies it all, so memory and time grow"
        else:
            how = "each step copies it all, so memory and time grow"
        head = f"`{site.key}` is re-made bigger every step with {what} ({how})"
    elif site.kind == "cached":
        return (f"`{a.segment(site.node)}` is called with a new argument every step on a "
                f"cache without a bound, so the cache keeps {what} per step for the whole "
                f"run ({_HOW_FAST[kind]}); give the cache a `maxsize` or do not cache "
                f"per-step values")
    elif site.kind == "keyed":
        target = site.node.targets[0] if isinstance(site.node, ast.Assign) else None
        text = a.segment(target) if target is not None else f"{site.key}.update(...)"
        head = f"`{text}` stores {what} under a new key every step"
    else:
        head = f"`{site.key}` gains {what} every step"
    if site.repeat is not None:
        head += f", many times per step (the loop on line {site.repeat.lineno})"
    tail = f"and is never cleared, trimmed or bounded, so it grows for the whole run " \
           f"({_HOW_FAST[kind]})"
    if kind == "graph":
        tail += "; detaching the value alone does not stop the growth"
    advice = "; clear it at the end of each epoch or keep a bounded window " \
             "(`collections.deque(maxlen=N)`, a running mean)"
    return f"{head} {tail}{advice}"


def _fix(a: Analysis, site: Site) -> Fix | None:
    """``key.clear()`` at the end of each epoch, or else a bounded ``deque``."""
    return _clear_fix(a, site) or _deque_fix(a, site)


def _deque_fix(a: Analysis, site: Site) -> Fix | None:
    """``history = []`` -> ``history = collections.deque(maxlen=1000)``."""
    if site.kind != "append" or site.scope not in ("module", "local") \
            or not isinstance(site.node, ast.Call) \
            or last_name(site.node.func) not in ("append", "appendleft"):
        return None
    owner = None if site.scope == "module" else site.ctx.func
    defs = [n for n, ctx in a.index.assigns if ctx.func is owner
            and isinstance(n, ast.Assign) and any(dotted(t) == site.key for t in n.targets)]
    if len(defs) != 1 or len(defs[0].targets) != 1 or not (
            isinstance(defs[0].value, ast.List) and not defs[0].value.elts):
        return None
    name, import_edit = _deque_name(a)
    if name is None:
        return None
    edits = (a.replace(defs[0].value, f"{name}(maxlen={_KEEP})"),) + import_edit
    return Fix(f"Keep only the last {_KEEP:,} entries: `{name}(maxlen={_KEEP})` (unsafe: "
               f"older entries are dropped, and a deque cannot be sliced or stacked as a "
               f"list)", edits, UNSAFE)


def _deque_name(a: Analysis) -> tuple[str | None, tuple[Edit, ...]]:
    """How this module reaches ``deque``, with the import to add when it does not."""
    body = a.index.tree.body
    imports = [s for s in body if isinstance(s, (ast.Import, ast.ImportFrom))]
    for node in imports:
        if isinstance(node, ast.Import):
            for al in node.names:
                if al.name == "collections":
                    return f"{al.asname or 'collections'}.deque", ()
        elif node.module == "collections":
            for al in node.names:
                if al.name == "deque":
                    return al.asname or "deque", ()
    if not imports:
        return None, ()
    last = imports[-1]
    end = last.end_lineno or last.lineno
    if last.col_offset or end > len(a.lines):
        return None, ()
    col = len(a.lines[end - 1]) + 1
    return "collections.deque", (Edit(end, col, end, col, "\nimport collections"),)


def _clear_fix(a: Analysis, site: Site) -> Fix | None:
    """``key.clear()`` as the last statement of the epoch loop around the batch loop."""
    loop = site.epoch_loop
    if loop is None or site.loop is None or loop is site.loop or site.kind == "rebind":
        return None
    if site.scope == "self":
        return None
    body = loop.body
    first, last = body[0], body[-1]
    if first.lineno == loop.lineno:
        return None  # ``for ...: stmt`` on one line
    indent = a.lines[first.lineno - 1][: a.char_col(first.lineno, first.col_offset)]
    if indent.strip():
        return None
    end = last.end_lineno or last.lineno
    col = len(a.lines[end - 1]) + 1
    return Fix(f"Clear `{site.key}` at the end of each pass of the loop on line "
               f"{loop.lineno} (unsafe: later code may still read it)",
               (Edit(end, col, end, col, f"\n{indent}{site.key}.clear()"),), UNSAFE)


def _returns(a: Analysis, site: Site) -> str:
    """What an unbounded cached function keeps, from its return annotation."""
    name = site.key
    func = next((f for f, _ctx in a.index.funcs if f.name == name), None)
    text = dotted(func.returns) if func is not None and func.returns is not None else ""
    return "tensor" if "Tensor" in text else ("array" if "ndarray" in text else "object")
