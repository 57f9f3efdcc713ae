"""Why the process grows: what the heap's own accounting shows over a growth window.

The recorder samples ``sys.getallocatedblocks()`` (Python objects) and the C
allocator's split (bytes in use, freed bytes it keeps, its own mmap()ed blocks); the
census counts tensor bytes. Against the process's measured growth they tell:
- **allocator retention**: the allocator's kept-free bytes grow with the process;
- **native memory**: bytes in use grow (or the process grows outside malloc) while
  Python objects and tensors stay flat;
- **Python objects**: the object count grows with the process.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from torchleak.analysis.series import RunData, Series
from torchleak.analysis.stats import theil_sen
from torchleak.units import format_bytes, format_count
from torchleak.vocab import FindingKind as K

EXPLAINS = 0.5  # a component explains the growth when it grows at least this share of it
RETAINED = 0.35  # freed-but-kept bytes this share of the growth (and the largest part)
FLAT = 0.15  # ... and a component is flat when it grows less than this share of it
BYTES_PER_BLOCK = 64  # a Python object's typical size, to weigh object counts as bytes


@dataclass
class Cause:
    kind: str | None  # K.ALLOCATOR_RETENTION | K.NATIVE_MEMORY | None (Python objects/unknown)
    evidence: list[str] = field(default_factory=list)


def slope_in(series: Series | None, first: float, last: float,
             min_points: int = 4) -> float | None:
    """The Theil-Sen slope of ``series`` between two steps (None when too few points)."""
    if series is None:
        return None
    pts = [(x, y) for x, y in zip(series.x, series.y) if first <= x <= last]
    if len(pts) < min_points:
        return None
    return theil_sen([p[0] for p in pts], [p[1] for p in pts])


def tensor_growth(data: RunData, first: float, last: float) -> tuple[float | None, bool]:
    """The tensor bytes' growth per step over a window, and whether it is only a bound.

    The census is sparse (anchors and budget): two samples in the window will do, else the
    run's last two. A single census after the window began still bounds the growth: the
    bytes it counted cannot have grown from less than nothing since then (a short run
    whose growth was seen late may get one census before it ends)."""
    census = data.census.get("tensor_bytes")
    if census is None:
        return None, False
    tensors = slope_in(census, first, last, min_points=2)
    if tensors is None and len(census.x) >= 2:
        tensors = slope_in(census, census.x[-2], census.x[-1], min_points=2)
    if tensors is not None:
        return tensors, False
    later = [(x, y) for x, y in zip(census.x, census.y) if x > first]
    if not later:
        return None, False
    step, counted = later[-1]
    return counted / (step - first), True


def classify(data: RunData, growth: float, first: float, last: float) -> Cause:
    """What the process's ``growth`` bytes/step between ``first`` and ``last`` is made of."""
    if growth <= 0:
        return Cause(None)
    kept_free = slope_in(data.heap.get("malloc_free"), first, last)
    in_use = slope_in(data.heap.get("malloc_in_use"), first, last)
    blocks = slope_in(data.heap.get("py_blocks"), first, last)
    tensors, at_most = tensor_growth(data, first, last)
    python = (blocks or 0.0) * BYTES_PER_BLOCK
    evidence = [f"process {format_bytes(growth, signed=True)}/step"]
    if blocks is not None:
        evidence.append(f"Python objects {format_count(blocks, signed=True)}/step")
    if tensors is not None:
        evidence.append(f"tensor bytes {'at most ' if at_most else ''}"
                        f"{format_bytes(tensors, signed=not at_most)}/step")
    if kept_free is not None:
        evidence.append(f"allocator free-but-kept {format_bytes(kept_free, signed=True)}/step")
    if in_use is not None:
        evidence.append(f"allocator in use {format_bytes(in_use, signed=True)}/step")
    line = ", ".join(evidence)
    objects_flat = (blocks is not None and tensors is not None and python < FLAT * growth
                    and tensors < FLAT * growth)
    free, used = kept_free or 0.0, in_use or 0.0
    if kept_free is not None and free >= RETAINED * growth and free >= used:
        return Cause(K.ALLOCATOR_RETENTION, [line])
    if objects_flat and (in_use is None or used >= EXPLAINS * growth
                         or free + used < FLAT * growth):
        # Handed out by malloc to code outside Python, or outside malloc altogether.
        return Cause(K.NATIVE_MEMORY, [line])
    return Cause(None, [line])
