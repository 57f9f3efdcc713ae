"""``torchleak check``: find memory-leak patterns in PyTorch training code statically.

Library use::

    from torchleak.check import check_source
    for d in check_source(code, "train.py"):
        print(d.location, d.code, d.message)

Nothing here imports torch: the checker runs anywhere, fast.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from torchleak.check.diagnostic import Diagnostic, Edit, Fix
    from torchleak.check.rules import ALL_RULES, META_CODES, Rule
    from torchleak.check.selection import Selection

__all__ = ["ALL_RULES", "META_CODES", "Diagnostic", "Edit", "Fix", "Rule", "check_paths",
           "check_source"]

# Loaded on first use (PEP 562): a run's end imports ``check.crossref`` alone, without
# the rules (~60 ms).
_LAZY = {"Diagnostic": "diagnostic", "Edit": "diagnostic", "Fix": "diagnostic",
         "ALL_RULES": "rules", "META_CODES": "rules", "Rule": "rules"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _selection(select: Iterable[str] | str | None, ignore: Iterable[str] | str | None,
               extend_select: Iterable[str] | str | None = None) -> Selection:
    from torchleak.check.selection import Selection, parse_codes

    return Selection.build(parse_codes(select, "select") or None,
                           parse_codes(ignore, "ignore"),
                           parse_codes(extend_select, "extend_select"))


def check_source(source: str, path: str = "<string>", select: Iterable[str] | str | None = None,
                 ignore: Iterable[str] | str | None = None) -> list[Diagnostic]:
    """Diagnostics for one Python source text (a notebook's JSON if ``path`` ends in
    ``.ipynb``). ``select``/``ignore`` take codes or prefixes (``"TL1"``, ``"ALL"``)."""
    from torchleak.check.engine import check_text
    from torchleak.check.notebook import check_notebook

    selection = _selection(select, ignore)
    if path.endswith(".ipynb"):
        return check_notebook(source, path, selection)
    return check_text(source, path, selection)


def check_paths(paths: Iterable[str], select: Iterable[str] | str | None = None,
                ignore: Iterable[str] | str | None = None,
                exclude: Iterable[str] = (), jobs: int | None = None) -> list[Diagnostic]:
    """Diagnostics for files and directories (walked with the default excludes)."""
    from torchleak.check.runner import check_many

    results = check_many(list(paths), _selection(select, ignore), exclude, jobs=jobs)
    return [d for r in results for d in r.diagnostics]
