"""Where each attribute of an analysed file grows and whether anything bounds it.

Shared by the rules about lists on ``self`` (TL103/TL202) and the container kinds
(``containers.attr_kind``), computed once per file.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from torchleak.check.astutil import dotted, last_name
from torchleak.check.context import Ctx
from torchleak.check.rules.base import Analysis

GROW = {"append", "extend", "insert", "appendleft"}
_SHRINK = {"clear", "pop", "popleft", "popitem", "remove"}


@dataclass
class Growth:
    """Where each attribute name grows and whether anything ever bounds it."""

    appends: dict[str, list[tuple[ast.Call, Ctx]]] = field(default_factory=dict)
    # (id of the class, attr) for ``self.attr`` inside a class; (0, attr) when the
    # receiver is not ``self`` (an outside caller may clear any instance's list).
    bounded: set[tuple[int, str]] = field(default_factory=set)

    def is_bounded(self, attr: str, ctx: Ctx) -> bool:
        return (0, attr) in self.bounded or (id(ctx.cls), attr) in self.bounded

    def appends_in(self, func: ast.AST) -> list[tuple[ast.Call, Ctx]]:
        return [(call, ctx) for sites in self.appends.values() for call, ctx in sites
                if ctx.func is func]


def growth(a: Analysis) -> Growth:
    cached = getattr(a, "_growth", None)
    if cached is not None:
        return cached
    g = Growth()
    compared = _compared_lengths(a)
    for call, ctx in a.index.calls:
        func = call.func
        if isinstance(func, ast.Attribute):
            attr = attr_of(func.value)
            if attr and func.attr in GROW:
                g.appends.setdefault(attr, []).append((call, ctx))
            elif attr and func.attr in _SHRINK:
                g.bounded.add(_bound_key(func.value, attr, ctx))
        if last_name(func) == "len" and call.args and id(call) in compared:
            attr = attr_of(call.args[0])
            if attr:  # a length check guards the growth (``print(len(x))`` does not)
                g.bounded.add(_bound_key(call.args[0], attr, ctx))
    for node, ctx in a.index.assigns:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        for t in targets:
            if isinstance(t, ast.Attribute) and not _in_init(ctx):
                if not (ctx.func is None and ctx.cls is None and fragment_self(a, t)):
                    g.bounded.add(_bound_key(t, t.attr, ctx))
            if isinstance(t, ast.Attribute) and _is_bounded_deque(node.value):
                g.bounded.add(_bound_key(t, t.attr, ctx))
    for stmt, ctx in a.index.stmt_ctx.items():
        if isinstance(stmt, ast.Delete):
            for t in stmt.targets:
                attr = attr_of(t)
                if attr:
                    g.bounded.add(_bound_key(t, attr, ctx))
    a._growth = g  # type: ignore[attr-defined]
    return g


def _compared_lengths(a: Analysis) -> set[int]:
    """``len(x)`` calls inside a comparison (``if len(x) > N``, ``while len(x) >= N``)."""
    found: set[int] = set()
    for node in ast.walk(a.index.tree):
        if isinstance(node, ast.Compare):
            found.update(id(c) for c in ast.walk(node)
                         if isinstance(c, ast.Call) and last_name(c.func) == "len")
    return found


def _bound_key(node: ast.AST, attr: str, ctx: Ctx) -> tuple[int, str]:
    if isinstance(node, ast.Subscript):
        node = node.value
    on_self = isinstance(node, ast.Attribute) and dotted(node.value) == "self"
    return (id(ctx.cls), attr) if on_self and ctx.cls is not None else (0, attr)


def _is_bounded_deque(value: ast.AST | None) -> bool:
    return (isinstance(value, ast.Call) and dotted(value.func).endswith("deque")
            and (len(value.args) >= 2 or any(k.arg == "maxlen" for k in value.keywords)))


def attr_of(node: ast.AST) -> str:
    """``self.x`` and ``self.x[k]`` -> ``x``."""
    if isinstance(node, ast.Subscript):
        node = node.value
    return node.attr if isinstance(node, ast.Attribute) else ""


def _in_init(ctx: Ctx) -> bool:
    return ctx.func is not None and ctx.func.name in ("__init__", "__post_init__", "setup")


def fragment_self(a: Analysis, node: ast.AST) -> bool:
    root = node
    while isinstance(root, (ast.Attribute, ast.Subscript)):
        root = root.value
    return isinstance(root, ast.Name) and root.id == "self" and a.index.is_undefined("self")
