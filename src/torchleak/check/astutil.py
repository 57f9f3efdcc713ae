"""Small, fast helpers over the stdlib ``ast`` shared by the rules."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator

Position = tuple[int, int]
LOOPS = (ast.For, ast.AsyncFor, ast.While)
FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef)
SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


def dotted(node: ast.AST) -> str:
    """``torch.cuda.empty_cache`` for an attribute chain; ``""`` when not a plain chain."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return ""


def last_name(node: ast.AST) -> str:
    """The final identifier of a callee: ``loss`` for ``self.loss``, ``f`` for ``f``."""
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Name):
        return node.id
    return ""


def root_name(node: ast.AST) -> str:
    """The variable at the root of ``a.b[c].d``; ``""`` when it is not a name."""
    while isinstance(node, (ast.Attribute, ast.Subscript, ast.Starred)):
        node = node.value
    return node.id if isinstance(node, ast.Name) else ""


def tokens(identifier: str) -> list[str]:
    """Lower-cased words of an identifier, split on underscores and camelCase."""
    return [t.lower() for t in _CAMEL.sub("_", identifier).split("_") if t]


def pos(node: ast.AST) -> Position:
    return (getattr(node, "lineno", 0), getattr(node, "col_offset", 0))


def names_in(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def walk_local(node: ast.AST) -> Iterator[ast.AST]:
    """Like ``ast.walk`` but does not enter nested functions, classes or lambdas."""
    stack = list(ast.iter_child_nodes(node))
    pop, push, extend = stack.pop, stack.append, stack.extend
    AST = ast.AST
    while stack:
        child = pop()
        yield child
        if isinstance(child, SCOPES):
            continue
        for name in child._fields:
            value = getattr(child, name, None)
            if type(value) is list:
                extend(v for v in value if isinstance(v, AST))
            elif isinstance(value, AST):
                push(value)


def keyword(call: ast.Call, name: str) -> ast.expr | None:
    for kw in call.keywords:
        if kw.arg == name:
            return kw.value
    return None


def is_const(node: ast.AST | None, value: object) -> bool:
    return isinstance(node, ast.Constant) and node.value is value


def target_key(node: ast.AST) -> str:
    """A comparable key for an assignment target or container: ``self.x``, ``d``."""
    if isinstance(node, ast.Subscript):
        return target_key(node.value)
    return dotted(node)
