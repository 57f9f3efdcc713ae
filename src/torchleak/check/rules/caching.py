"""TL203: ``functools`` caches that keep models or tensors alive forever."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator

from torchleak.check.astutil import dotted, is_const, keyword
from torchleak.check.context import Func
from torchleak.check.rules.base import Analysis, Finding, Rule

_TORCHY_BASES = ("Module", "Dataset", "Model", "Net", "Lightning", "Layer")


def _cache_decorator(deco: ast.AST) -> tuple[str, bool] | None:
    """(shown name, unbounded) for functools cache decorators."""
    call = deco if isinstance(deco, ast.Call) else None
    name = dotted(call.func if call else deco)
    if name in ("functools.cache", "cache"):
        return "@cache", True
    if name in ("functools.lru_cache", "lru_cache"):
        if call is None:
            return "@lru_cache", False
        size = keyword(call, "maxsize")
        size = size if size is not None else (call.args[0] if call.args else None)
        return "@lru_cache", is_const(size, None) and size is not None
    return None


def _from_functools(a: Analysis, name: str) -> bool:
    return any(isinstance(n, ast.ImportFrom) and n.module == "functools"
               and any(al.name == name for al in n.names) for n in a.index.imports)


class CacheKeepsObjectsAlive(Rule):
    """## What it does
    Finds `functools.lru_cache`/`cache` on a method of an `nn.Module`/`Dataset`/Lightning class
    (or on `__getitem__`/`forward`), and an unbounded cache (`@cache`, `maxsize=None`) on a
    function annotated to take tensors.

    ## Why is this bad?
    A class-level cache keeps every `self` it saw (the model, with its weights) alive after the
    model is deleted; on `__getitem__` it caches every sample in every worker. Tensors hash by
    identity, so a cache keyed on them never hits and only grows.

    Not reported: bounded caches on functions of plain values, `staticmethod`s, methods of
    non-torch classes.

    ## Example
    ```python
    class Encoder(nn.Module):
        @functools.lru_cache(maxsize=None)
        def embed(self, token_id):
            return self.table[token_id]
    ```

    Use instead:
    ```python
    class Encoder(nn.Module):
        def embed(self, token_id):
            return self.table[token_id]
    ```

    ## Fix safety
    No fix.
    """

    code = "TL203"
    name = "cache-keeps-objects-alive"
    summary = "`lru_cache`/`cache` on a method, or unbounded on a function taking tensors."

    def check(self, a: Analysis) -> Iterator[Finding]:
        for func, ctx in a.index.funcs:
            for deco in func.decorator_list:
                found = _cache_decorator(deco)
                if found is None:
                    continue
                shown, unbounded = found
                if shown == "@cache" and dotted(deco) == "cache" and \
                        not _from_functools(a, "cache"):
                    continue
                if ctx.cls is not None and ctx.func is None and _is_method(func):
                    if _torchy(ctx.cls) or func.name in ("__getitem__", "forward"):
                        yield Finding(deco, f"`{shown}` on method `{func.name}` keeps every "
                                            f"`self` it saw (with its tensors) alive in a "
                                            f"class-level cache; use a per-instance dict "
                                            f"keyed on hashable values, or drop the cache")
                elif unbounded and _takes_tensor(func):
                    yield Finding(deco, f"unbounded `{shown}` on `{func.name}` keeps every "
                                        f"tensor passed to it alive (tensors hash by id, so "
                                        f"it never hits); remove it or key on plain values")


def _is_method(func: Func) -> bool:
    if any(dotted(d) in ("staticmethod", "classmethod") for d in func.decorator_list):
        return False
    args = func.args.posonlyargs + func.args.args
    return bool(args) and args[0].arg == "self"


def _torchy(cls: ast.ClassDef) -> bool:
    return any(dotted(b).endswith(_TORCHY_BASES) for b in cls.bases)


def _takes_tensor(func: Func) -> bool:
    every = func.args.posonlyargs + func.args.args + func.args.kwonlyargs
    return any(x.annotation is not None and _mentions_tensor(x.annotation) for x in every)


def _mentions_tensor(annotation: ast.AST) -> bool:
    for node in ast.walk(annotation):
        if isinstance(node, (ast.Name, ast.Attribute)) and \
                (getattr(node, "id", None) or getattr(node, "attr", "")) == "Tensor":
            return True
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and \
                re.search(r"\bTensor\b", node.value):
            return True
    return False
