"""``# noqa`` and ``# noqa: TL101, TL2`` suppression comments, as in flake8/ruff."""

from __future__ import annotations

import re

_NOQA = re.compile(r"#\s*noqa(?::[\s]?(?P<codes>[A-Z]+[0-9]*(?:[,\s]+[A-Z]+[0-9]*)*))?",
                   re.IGNORECASE)


def suppressed(line: str, code: str) -> bool:
    """True when ``line`` carries a noqa comment that covers ``code``."""
    if "noqa" not in line.lower():
        return False
    for match in _NOQA.finditer(line):
        codes = match.group("codes")
        if codes is None:
            return True
        if any(code.startswith(c.upper()) for c in re.split(r"[,\s]+", codes) if c):
            return True
    return False
