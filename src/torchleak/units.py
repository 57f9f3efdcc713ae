"""Human formatting of bytes, counts, rates and durations: one unit system (IEC: KiB,
MiB, GiB) for every screen torchleak prints, and the one reader of sizes users type
(``parse_bytes``)."""

from __future__ import annotations

import math
import re
import time

from torchleak.errors import UsageError

_BYTE_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")


def number(value: object) -> float | None:
    """``value`` as a finite float, or None (a formatter never fails on a bad value)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    result = float(value)
    return result if math.isfinite(result) else None


def format_bytes(value: object, signed: bool = False) -> str:
    """``1536`` -> ``1.5 KiB``; ``None`` (or anything not a number) -> ``-``."""
    n = number(value)
    if n is None:
        return "-"
    sign = "+" if signed and n > 0 else ("-" if n < 0 else "")
    size = abs(n)
    unit = 0
    while size >= 1024 and unit < len(_BYTE_UNITS) - 1:
        size /= 1024
        unit += 1
    if unit == 0:
        return f"{sign}{size:.0f} B"
    return f"{sign}{size:.3g} {_BYTE_UNITS[unit]}" if size < 100 else f"{sign}{size:.0f} {_BYTE_UNITS[unit]}"


def format_count(value: object, signed: bool = False) -> str:
    """``12345`` -> ``12,345``; fractions keep three significant digits."""
    n = number(value)
    if n is None:
        return "-"
    sign = "+" if signed and n > 0 else ""
    if n.is_integer():
        return f"{sign}{int(n):,}"
    return f"{sign}{n:,.3g}" if abs(n) < 1000 else f"{sign}{n:,.0f}"


def format_value(value: object, unit: str, signed: bool = False) -> str:
    return format_bytes(value, signed) if unit == "bytes" else format_count(value, signed)


def format_rate(value: object, unit: str, per: str = "step") -> str:
    if number(value) is None:
        return "-"
    return f"{format_value(value, unit, signed=True)}/{per}"


def format_duration(seconds: object) -> str:
    """``4000`` -> ``1h 06m``; short spans keep seconds."""
    n = number(seconds)
    if n is None or n < 0:
        return "-"
    if n < 60:
        return f"{n:.1f}s" if n < 10 else f"{n:.0f}s"
    minutes, secs = divmod(int(n), 60)
    if minutes < 60:
        return f"{minutes}m {secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{hours}h {minutes:02d}m"
    return f"{hours // 24}d {hours % 24}h"


def format_time(timestamp: object) -> str:
    n = number(timestamp)
    if not n:
        return "-"
    try:
        return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(n))
    except (OverflowError, OSError, ValueError):
        return "-"


_SIZE_UNITS = {"": 1, "b": 1,
               "k": 1 << 10, "kib": 1 << 10, "kb": 10**3,
               "m": 1 << 20, "mib": 1 << 20, "mb": 10**6,
               "g": 1 << 30, "gib": 1 << 30, "gb": 10**9,
               "t": 1 << 40, "tib": 1 << 40, "tb": 10**12}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*([a-zA-Z]*)\s*$")
SIZE_FORMS = "a size like 12GiB, 800MB, 1.5G or 12884901888 (bytes)"


def parse_bytes(text: str | int) -> int:
    """Bytes from ``"12GiB"``, ``"800MB"``, ``"1.5G"``, ``"64KiB"`` or ``"12884901888"``.

    KiB/MiB/GiB/TiB and the bare K/M/G/T letters are powers of 1024 (as in ``free -g``
    and Docker); KB/MB/GB/TB are powers of 1000. Raises ``UsageError`` with one line
    saying what is accepted.
    """
    if isinstance(text, int) and not isinstance(text, bool):
        text = str(text)
    if not isinstance(text, str):
        raise UsageError(f"expected {SIZE_FORMS}, got {text!r}")
    match = _SIZE.match(text)
    if match is None:
        raise UsageError(f"cannot read {text!r} as a size: expected {SIZE_FORMS}")
    digits, unit = match.groups()
    factor = _SIZE_UNITS.get(unit.lower())
    if factor is None:
        raise UsageError(f"unknown unit {unit!r} in {text!r}: expected {SIZE_FORMS}; units "
                         "are B, KiB, MiB, GiB, TiB (KB, MB, GB, TB for powers of 1000)")
    size = float(digits) * factor
    if not math.isfinite(size):
        raise UsageError(f"{text!r} is too large to be a size")
    return int(size)
