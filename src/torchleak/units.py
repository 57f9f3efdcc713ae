"""Human formatting of bytes, counts, rates and durations: one unit system (IEC: KiB,
MiB, GiB) for every screen torchleak prints, and the parser for sizes users type."""

from __future__ import annotations

import math
import time

_BYTE_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")


def format_bytes(value: float | None, signed: bool = False) -> str:
    """``1536`` -> ``1.5 KiB``; ``None`` -> ``-``."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    sign = "+" if signed and value > 0 else ("-" if value < 0 else "")
    size = abs(float(value))
    unit = 0
    while size >= 1024 and unit < len(_BYTE_UNITS) - 1:
        size /= 1024
        unit += 1
    if unit == 0:
        return f"{sign}{size:.0f} B"
    return f"{sign}{size:.3g} {_BYTE_UNITS[unit]}" if size < 100 else f"{sign}{size:.0f} {_BYTE_UNITS[unit]}"


def format_count(value: float | None, signed: bool = False) -> str:
    """``12345`` -> ``12,345``; fractions keep two significant digits."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    sign = "+" if signed and value > 0 else ""
    if float(value).is_integer():
        return f"{sign}{int(value):,}"
    return f"{sign}{value:,.3g}" if abs(value) < 1000 else f"{sign}{value:,.0f}"


def format_value(value: float | None, unit: str, signed: bool = False) -> str:
    return format_bytes(value, signed) if unit == "bytes" else format_count(value, signed)


def format_rate(value: float | None, unit: str, per: str = "step") -> str:
    if value is None:
        return "-"
    return f"{format_value(value, unit, signed=True)}/{per}"


def format_duration(seconds: float | None) -> str:
    """``4000`` -> ``1h 6m``; short spans keep seconds."""
    if seconds is None or seconds < 0 or math.isinf(seconds):
        return "-"
    if seconds < 60:
        return f"{seconds:.1f}s" if seconds < 10 else f"{seconds:.0f}s"
    minutes, secs = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes}m {secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{hours}h {minutes:02d}m"
    return f"{hours // 24}d {hours % 24}h"


def format_time(timestamp: float | None) -> str:
    if not timestamp:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(float(timestamp)))


_SIZE_UNITS = {"": 1, "b": 1, "k": 1000, "kb": 1000, "kib": 1024, "ki": 1024,
               "m": 1000**2, "mb": 1000**2, "mib": 1024**2, "mi": 1024**2,
               "g": 1000**3, "gb": 1000**3, "gib": 1024**3, "gi": 1024**3,
               "t": 1000**4, "tb": 1000**4, "tib": 1024**4, "ti": 1024**4}


def parse_size(text: str) -> int:
    """``"12GiB"``, ``"800MB"``, ``"1.5G"`` or a byte count -> bytes.

    Raises ``ValueError`` with a message that shows the accepted forms."""
    raw = str(text).strip().replace("_", "").replace(" ", "")
    number = raw.rstrip("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
    unit = raw[len(number):].lower()
    try:
        value = float(number)
    except ValueError:
        value = float("nan")
    if unit not in _SIZE_UNITS or not math.isfinite(value) or value <= 0:
        raise ValueError(f"{text!r} is not a memory size: use e.g. 12GiB, 800MB, 1.5G or a "
                         "number of bytes")
    return int(value * _SIZE_UNITS[unit])
