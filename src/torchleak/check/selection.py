"""Which codes are on: ruff-style ``select``/``ignore`` by code or prefix."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from torchleak.errors import UsageError

DEFAULT_SELECT = ("TL0", "TL1", "TL2", "TL3")
_PREFIX = re.compile(r"^(ALL|TL\d{0,3})$")


def parse_codes(values: Iterable[str] | str | None, where: str) -> list[str]:
    """``"TL101, TL2"`` or ``["TL101"]`` -> ``["TL101", "TL2"]``; rejects unknown forms."""
    if values is None:
        return []
    if isinstance(values, str):
        values = [values]
    if not isinstance(values, (list, tuple)):
        raise UsageError(f"{where}: expected a list of rule codes, got {values!r}")
    out: list[str] = []
    for value in values:
        if not isinstance(value, str):
            raise UsageError(f"{where}: expected rule codes as strings, got {value!r}")
        for part in value.replace(",", " ").split():
            code = part.strip().upper()
            if not _PREFIX.match(code):
                raise UsageError(f"{where}: {part!r} is not a rule code or prefix "
                                 f"(expected e.g. TL101, TL1 or ALL)")
            out.append(code)
    return out


@dataclass(frozen=True)
class Selection:
    select: tuple[str, ...] = DEFAULT_SELECT
    ignore: tuple[str, ...] = ()

    def enabled(self, code: str) -> bool:
        """The most specific matching prefix wins; on a tie, ignore wins (as in ruff)."""
        sel = _longest(code, self.select)
        ign = _longest(code, self.ignore)
        if code.startswith("TL0"):
            return ign < 3  # checker diagnostics are on unless ignored explicitly
        return sel >= 0 and sel > ign

    @classmethod
    def build(cls, select: list[str] | None = None, ignore: list[str] | None = None,
              extend_select: list[str] | None = None) -> Selection:
        base = tuple(select) if select else DEFAULT_SELECT
        return cls(base + tuple(extend_select or ()), tuple(ignore or ()))


def _longest(code: str, prefixes: tuple[str, ...]) -> int:
    best = -1
    for prefix in prefixes:
        if prefix == "ALL":
            best = max(best, 0)
        elif code.startswith(prefix):
            best = max(best, len(prefix))
    return best
