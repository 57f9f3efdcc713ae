"""Unicode sparklines for the terminal views."""

from __future__ import annotations

from collections.abc import Sequence

_BARS = "▁▂▃▄▅▆▇█"


def sparkline(values: Sequence[float | None], width: int = 40) -> str:
    """Bucket ``values`` into ``width`` cells (max per cell) and draw one bar per cell.

    Max, not mean, so a single spike stays visible; a flat series draws a flat low line.
    """
    points = [v for v in values if v is not None]
    if not points:
        return ""
    cells = _bucket_max(points, max(1, width))
    low, high = min(cells), max(cells)
    span = high - low
    if span <= abs(high) * 1e-9 or span == 0:
        return _BARS[0] * len(cells)
    top = len(_BARS) - 1
    return "".join(_BARS[round((v - low) / span * top)] for v in cells)


def _bucket_max(points: list[float], width: int) -> list[float]:
    if len(points) <= width:
        return points
    cells = []
    for i in range(width):
        lo = i * len(points) // width
        hi = max(lo + 1, (i + 1) * len(points) // width)
        cells.append(max(points[lo:hi]))
    return cells
