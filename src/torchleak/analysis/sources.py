"""Point a finding at the source line that adds to its holder (a text search of the
user's script, cheap and good enough to give a line to look at)."""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

_GROW = r"(\.append\(|\.extend\(|\.add\(|\.update\(|\.insert\(|\.appendleft\(|\s*\+=|\[[^\]]*\]\s*=)"
_KIND_PATTERNS = {
    "hooks": r"register_(full_backward_|forward_pre_|forward_|backward_)?hook\(",
    "figures": r"(plt|pyplot)\.(figure|subplots)\(",
    "cache": r"@(functools\.)?(lru_cache|cache)\b",
}


@lru_cache(maxsize=16)
def _lines(path: str) -> tuple[str, ...]:
    try:
        return tuple(Path(path).read_text(errors="replace").splitlines())
    except OSError:
        return ()


def find_source(script: str | None, kind: str, name: str) -> str | None:
    if not script:
        return None
    lines = _lines(script)
    if kind in _KIND_PATTERNS:
        pattern = re.compile(_KIND_PATTERNS[kind])
    elif name and name.isidentifier():
        pattern = re.compile(rf"\b{re.escape(name)}{_GROW}")
    else:
        return None
    for number, line in enumerate(lines, 1):
        if pattern.search(line) and not line.lstrip().startswith("#"):
            return f"{script}:{number}: {line.strip()}"
    return None
