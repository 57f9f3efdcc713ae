"""Where the memory goes: the category split measured at each census, its rates, and
the category that grows with each finding.

The split is measured, never modelled: the recorder writes one row per category at each
census (``breakdown`` table) and the host categories sum to ``total`` (main USS plus the
workers' USS) by construction, with ``allocator_slack`` holding what nothing explains.
Steps between censuses carry the last census's figures; every point keeps the step it
was measured at.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from torchleak.analysis.series import HolderSeries, RunData
from torchleak.analysis.stats import theil_sen
from torchleak.analysis.thresholds import KIB, warmup_steps
from torchleak.report import Finding
from torchleak.units import format_bytes
from torchleak.vocab import FindingKind as K
from torchleak.vocab import Signal as S

HOST = ("parameters", "gradients", "optimizer_state", "autograd_saved", "other_tensors",
        "python_objects", "allocator_slack", "workers")
CUDA = ("cuda_parameters", "cuda_gradients", "cuda_optimizer_state", "cuda_autograd_saved",
        "cuda_other_tensors", "cuda_cache", "cuda_other")
TOTALS = ("total", "cuda_total")
CATEGORIES = HOST + CUDA
TENSOR_ROLES = ("parameters", "gradients", "optimizer_state", "autograd_saved",
                "other_tensors")
# Exact sums of storages move only when tensors come and go; heap readings are noisier.
MIN_RATE = {"exact": 256.0, "heap": 4 * KIB}
_TENSOR_KINDS = (K.AUTOGRAD_GRAPH, K.TENSOR_LIST, K.TENSOR_LIST_GRAPH, K.TENSOR_GROWTH,
                 K.TENSORS)
Points = Sequence[Sequence[float]]
GROWS = "where it grows (census breakdown):"


def breakdown_points(data: RunData) -> dict[str, list[list[float]]]:
    """``{category: [[step, bytes], ...]}`` in the categories' order, then the totals;
    categories never measured are left out."""
    known = [name for name in (*CATEGORIES, *TOTALS) if name in data.breakdown]
    others = sorted(set(data.breakdown) - set(known))
    found = {}
    for name in (*known, *others):
        series = data.breakdown[name]
        # Two censuses at one step (a snapshot on request and a scheduled one): the later.
        by_step = {int(x): int(y) for x, y in zip(series.x, series.y)}
        if by_step:
            found[name] = [[step, value] for step, value in sorted(by_step.items())]
    return found


def category_rates(breakdown: Mapping[str, Points], since: float) -> dict[str, float]:
    """Growth per step of each category from ``since`` on (all points when fewer than two
    come after it): the median of pairwise slopes."""
    rates = {}
    for name, points in breakdown.items():
        use = _window(points, since)
        if len(use) >= 2:
            rates[name] = theil_sen([p[0] for p in use], [p[1] for p in use])
    return rates


def _window(points: Points, since: float) -> list[Sequence[float]]:
    later = [p for p in points if p[0] >= since]
    return later if len(later) >= 2 else list(points)


def rates_span(breakdown: Mapping[str, Points], since: float) -> tuple[int, int] | None:
    """The first and last census step the rates are measured between: a short run has
    few censuses, and its rates may cover other steps than a finding's own."""
    points = _window(breakdown.get("total", ()), since)
    return (int(points[0][0]), int(points[-1][0])) if len(points) >= 2 else None


def growing(name: str, rate: float | None) -> bool:
    """Above the noise of its kind of reading."""
    kind = "exact" if name.removeprefix("cuda_") in TENSOR_ROLES else "heap"
    return rate is not None and rate >= MIN_RATE[kind]


def assign_categories(findings: list[Finding], data: RunData,
                      breakdown: Mapping[str, Points]) -> dict[str, float]:
    """Set each finding's ``category`` and say how the categories moved, in place; the
    categories' rates after warm-up are returned (for the report)."""
    if not breakdown:
        return {}
    rates = category_rates(breakdown, warmup_steps(data.steps))
    span = rates_span(breakdown, warmup_steps(data.steps))
    for finding in findings:
        finding.category = category_for(finding, data.holders.get(finding.holder_path or ""),
                                         rates)
        line = rates_line(rates, finding.category, span)
        if line:
            finding.evidence.append(line)
    return {name: round(rate, 1) for name, rate in rates.items()}


def category_for(finding: Finding, holder: HolderSeries | None,
                 rates: Mapping[str, float]) -> str | None:
    """The category that grows with this finding."""
    fixed = {K.WORKER_MEMORY: "workers", K.FRAGMENTATION: "cuda_cache",
             K.ALLOCATOR_RETENTION: "allocator_slack"}.get(finding.kind)  # type: ignore[call-overload]
    if fixed:
        return fixed
    prefix = "cuda_" if finding.signal == S.CUDA_ALLOCATED else ""
    holds_tensors = bool(holder is not None and any(holder.tensors)) or (
        finding.kind in _TENSOR_KINDS)
    if finding.kind == K.AUTOGRAD_GRAPH:
        # After backward a kept graph holds its nodes (native heap), not its activations.
        return _fastest([prefix + "autograd_saved", "python_objects"], rates) or (
            "python_objects")
    if holds_tensors:
        matched = _closest([prefix + r for r in TENSOR_ROLES], rates,
                           finding.holder_bytes_per_step)
        if matched:
            return matched  # an optimizer's state grows with the parameters, at its own rate
        if growing(prefix + "parameters", rates.get(prefix + "parameters")):
            return prefix + "parameters"  # gradients and optimizer state follow parameters
        roles = [prefix + r for r in ("other_tensors", "autograd_saved", "gradients",
                                      "optimizer_state")]
        fastest = _fastest(roles, rates)
        if fastest:
            return fastest
        return prefix + ("autograd_saved" if finding.kind == K.AUTOGRAD_GRAPH
                         else "other_tensors")
    if holder is not None or finding.kind not in (K.MEMORY, K.NATIVE_MEMORY):
        return "python_objects"  # a container of Python objects, a buffer, hooks, figures
    return _fastest([c for c in HOST if c != "workers"], rates)


def _closest(names: Sequence[str], rates: Mapping[str, float],
             holder_rate: float | None) -> str | None:
    """The growing category whose rate is nearest (as a ratio, within 3x) to the rate of
    the bytes the holder keeps."""
    if not holder_rate or holder_rate <= 0:
        return None
    moving = [n for n in names if growing(n, rates.get(n))]
    distance = {n: abs(math.log(rates[n] / holder_rate)) for n in moving}
    best = min(distance, key=distance.__getitem__, default=None)
    return best if best is not None and distance[best] <= math.log(3) else None


def _fastest(names: Sequence[str], rates: Mapping[str, float]) -> str | None:
    moving = [n for n in names if growing(n, rates.get(n))]
    return max(moving, key=lambda n: rates[n]) if moving else None


def rates_line(rates: Mapping[str, float], category: str | None,
               span: tuple[int, int] | None = None) -> str:
    """'where it grows (census breakdown): steps 50-400: other_tensors +256 KiB/step;
    parameters, gradients, optimizer_state flat'."""
    prefix = "cuda_" if category and category.startswith("cuda_") else ""
    tracked = [prefix + r for r in ("parameters", "gradients", "optimizer_state")]
    moving = [n for n in rates if growing(n, rates[n]) and n not in TOTALS]
    if category and category not in moving and category in rates:
        moving.insert(0, category)
    if not moving and not any(t in rates for t in tracked):
        return ""
    moving.sort(key=lambda n: (n != category, -rates[n]))
    parts = [f"{n} {format_bytes(rates[n], signed=True)}/step" for n in moving]
    flat = [t for t in tracked if t in rates and t not in moving]
    if flat:
        parts.append(f"{', '.join(flat)} flat")
    window = f"steps {span[0]:,}-{span[1]:,}: " if span else ""
    return GROWS + " " + window + "; ".join(parts)
