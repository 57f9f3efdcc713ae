"""Point a finding at the source line that adds to its holder.

The user's script is parsed with ``ast`` (never imported or run again): the first real
statement that grows the named holder (``name.append(...)``, ``name += ...``,
``name[k] = ...``) or that creates the kind of thing that grows (a hook registration, a
figure, an ``lru_cache`` decorator). Strings and comments never match. A run of
``-m package.module`` reads the module's file, found on the path as ``python -m`` finds
it, without importing anything.
"""

from __future__ import annotations

import ast
import os
import sys
from functools import lru_cache
from pathlib import Path

_GROWING_METHODS = {"append", "extend", "add", "update", "insert", "appendleft", "setdefault"}
_HOOK_CALLS = {"register_forward_hook", "register_forward_pre_hook", "register_hook",
               "register_full_backward_hook", "register_backward_hook",
               "register_full_backward_pre_hook", "register_module_forward_hook",
               "register_module_forward_pre_hook", "register_module_full_backward_hook",
               "register_post_accumulate_grad_hook", "register_step_post_hook",
               "register_step_pre_hook", "register_optimizer_step_post_hook",
               "register_optimizer_step_pre_hook", "register", "finalize", "addHandler"}
_FIGURE_CALLS = {"figure", "subplots"}


@lru_cache(maxsize=16)
def _parse(path: str) -> tuple[tuple[ast.AST, ...] | None, tuple[str, ...]]:
    """The file's statements and expressions in source order, and its lines: parsed and
    ordered once (the live detector asks at every pass)."""
    try:
        text = Path(path).read_text(errors="replace")
        return _nodes_in_order(ast.parse(text)), tuple(text.splitlines())
    except (OSError, SyntaxError, ValueError):
        return None, ()


def _name_of(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Subscript):
        return _name_of(node.value)
    return None


def _matches(node: ast.AST, kind: str, name: str) -> bool:
    if kind == "cache" and isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return node.name == name and any(_name_of(d.func if isinstance(d, ast.Call) else d)
                                         in ("lru_cache", "cache") for d in node.decorator_list)
    if isinstance(node, ast.Call) and isinstance(node.func, (ast.Attribute, ast.Name)):
        method = node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id
        if kind == "hooks":
            return method in _HOOK_CALLS
        if not isinstance(node.func, ast.Attribute):
            return False
        if kind == "figures":
            return method in _FIGURE_CALLS and _name_of(node.func.value) in ("plt", "pyplot")
        return method in _GROWING_METHODS and _name_of(node.func.value) == name
    if kind == "buffer" and isinstance(node, ast.Assign):
        # `log = log + line` rebinds a longer string every step.
        return any(_name_of(t) == name for t in node.targets) and isinstance(
            node.value, ast.BinOp) and _name_of(node.value.left) == name
    if kind in ("hooks", "figures", "cache"):
        return False
    if isinstance(node, ast.AugAssign):
        return _name_of(node.target) == name
    if isinstance(node, ast.Assign):
        return any(isinstance(t, ast.Subscript) and _name_of(t.value) == name for t in node.targets)
    return False


def _nodes_in_order(tree: ast.Module) -> tuple[ast.AST, ...]:
    return tuple(sorted((n for n in ast.walk(tree) if hasattr(n, "lineno")),
                        key=lambda n: (n.lineno, n.col_offset)))


def module_file(module: str) -> str | None:
    """The file ``python -m module`` runs (``pkg/mod.py``, or ``pkg/__main__.py`` for a
    package), looked up in the current folder, then on ``sys.path``; relative to the
    current folder when it is inside it. Nothing is imported: a package's
    ``__init__`` is user code, and a report must not run it."""
    parts = module.split(".")
    if not all(part.isidentifier() for part in parts):
        return None
    for base in dict.fromkeys([os.getcwd(), *(p or os.getcwd() for p in sys.path)]):
        root = Path(base).joinpath(*parts)
        for candidate in (root.with_name(root.name + ".py"), root / "__main__.py"):
            if candidate.is_file():
                relative = os.path.relpath(candidate)
                return str(candidate) if relative.startswith("..") else relative
    return None


def find_source(script: str | None, kind: str, name: str) -> str | None:
    """``file:line: code`` of the first statement that grows ``name``, or None.
    ``script`` is the run's script, or ``-m package.module``."""
    if script and script.startswith("-m "):
        script = module_file(script[3:].strip())
    if not script:
        return None
    nodes, lines = _parse(script)
    if nodes is None or (kind not in ("hooks", "figures") and not name.isidentifier()):
        return None
    for node in nodes:
        if _matches(node, kind, name):
            line = node.lineno
            return f"{script}:{line}: {lines[line - 1].strip()}"
    return None
