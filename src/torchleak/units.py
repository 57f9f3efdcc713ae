"""Human formatting of bytes, counts, rates and durations: one unit system (IEC: KiB,
MiB, GiB) for every screen torchleak prints. (Sizes users type are read by
``torchleak.system.limits.parse_size``.)"""

from __future__ import annotations

import math
import time

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
