"""Every rate a finding prints is the memory the process measurably loses.

For each measured signal (main USS, workers' USS, CUDA allocated) the findings that
explain it share its measured growth over their growth window, in proportion to their
holders' own sizes; the holder's own size stays beside it as a separate figure. When the
process grows much faster than the named holders explain, the finding says so and names
the cause the heap shows (freed memory the allocator keeps, or native memory), with the
fix for that cause first. When the signal is too flat to measure (a list of floats), the
holder's own growth is the rate, marked as such.
"""

from __future__ import annotations

from collections import defaultdict

from torchleak.analysis.advice import RETENTION_PREFIX, advice_for
from torchleak.analysis.causes import classify
from torchleak.analysis.stats import mann_kendall_z, theil_sen, troughs
from torchleak.analysis.holders import HolderFinding
from torchleak.analysis.oom import project
from torchleak.analysis.series import RunData
from torchleak.analysis.signals import WINDOWS, Judged
from torchleak.analysis.trend import MIN_POINTS, Z_GROWING
from torchleak.analysis.thresholds import HIGH_BYTES_PER_STEP, warmup_steps
from torchleak.report import Finding
from torchleak.units import format_bytes
from torchleak.vocab import FindingKind as K
from torchleak.vocab import Severity

FASTER = 3.0  # the process grows this many times faster than its holders: say why
# Process memory moves in pages and allocator arenas: growth below this over the window is
# not measured, and the holder's own size is the rate (marked as such).
RESOLUTION = 1024 * 1024


def measured_slope(data: RunData, judged: dict[str, Judged], signal: str,
                   since: float) -> float | None:
    """The signal's growth per step while the holders grow (from ``since`` on).

    A holder known to grow without bound makes the process's growth in the same window
    its to explain, even when the signal alone would not pass as a leak (an allocator's
    staircase looks like plateaus): a monotone trend of the window's troughs is enough."""
    j = judged.get(signal)
    if j is None:
        return None
    start = max(since, warmup_steps(data.steps))
    pts = [(x, y) for x, y in zip(j.series.x, j.series.y) if x >= start]
    judged_slope = None
    if j.trend.growing and j.series.x and \
            j.trend.slope * (j.series.x[-1] - start) >= RESOLUTION:  # else below what USS resolves
        judged_slope = j.trend.slope
    if len(pts) < MIN_POINTS:
        return judged_slope
    tx, ty = troughs([p[0] for p in pts], [p[1] for p in pts], WINDOWS)
    if len(tx) < 3 or mann_kendall_z(ty) < Z_GROWING:
        return judged_slope
    window = theil_sen(tx, ty)
    if window * (tx[-1] - tx[0]) < RESOLUTION:
        return judged_slope
    # A late onset: the growth window's own slope; else the judged (trough) slope.
    return max(window, j.trend.slope if j.trend.growing else 0.0) or None


def assign_rates(data: RunData, judged: dict[str, Judged], holders: list[HolderFinding],
                 others: list[Finding]) -> None:
    """Fill ``bytes_per_step``, ``oom`` and the cause of every finding, in place."""
    by_signal: dict[str, list[HolderFinding]] = defaultdict(list)
    for h in holders:
        if h.finding.serious:
            by_signal[h.finding.signal].append(h)
    for signal, group in by_signal.items():
        _share(data, judged, signal, group)
    for h in holders:
        if h.finding.bytes_per_step is None:  # low severity, or a signal too flat to tell
            h.finding.bytes_per_step = h.finding.holder_bytes_per_step
            h.finding.rate_basis = "holder"
        _per_epoch(h)
    for finding in others:
        if finding.bytes_per_step is None and finding.signal in judged:
            finding.bytes_per_step = round(judged[finding.signal].trend.slope, 1)
    everything = [h.finding for h in holders] + others
    for finding in everything:
        if finding.severity == Severity.HIGH and not (finding.bytes_per_step or 0) > 0:
            finding.severity = Severity.MEDIUM.value  # high means a measured loss per step
        if finding.serious:  # a finding that does not drive the growth projects nothing
            finding.oom = project(data, finding.signal,
                                  _signal_total(judged, finding, everything))


def _signal_total(judged: dict[str, Judged], finding: Finding,
                  findings: list[Finding]) -> float | None:
    """The signal's whole growth: one projection per signal, whichever finding shows it.
    The judged trend when the signal grows by itself, else what its serious findings'
    rates add up to (the process loses all of them at once)."""
    shares = sum(f.bytes_per_step or 0.0 for f in findings
                 if f.signal == finding.signal and f.serious)
    j = judged.get(finding.signal)
    if j is not None and j.trend.growing:
        return max(j.trend.slope, shares, finding.bytes_per_step or 0.0)
    return max(shares, finding.bytes_per_step or 0.0) or finding.bytes_per_step


def _share(data: RunData, judged: dict[str, Judged], signal: str,
           group: list[HolderFinding]) -> None:
    onset = min(h.onset for h in group)
    measured = measured_slope(data, judged, signal, onset)
    if measured is None or measured <= 0:
        return
    own = [max(0.0, h.finding.holder_bytes_per_step or 0.0) for h in group]
    total_own = sum(own)
    weights = [o / total_own for o in own] if total_own > 0 else [1 / len(group)] * len(group)
    carriers = [h.finding.holder_path or h.finding.culprit
                for h, weight in zip(group, weights) if weight > 0]
    for h, weight in zip(group, weights):
        h.finding.bytes_per_step = round(measured * weight, 1)
        h.finding.rate_basis = "measured" if weight > 0 else "shared"
        if weight == 0:
            # Its own size does not grow apart from what the others keep (a tensor whose
            # graph holds the outputs a list keeps): their shares already count it.
            h.finding.evidence.append(
                f"what it keeps is also kept by {', '.join(carriers)}: the measured growth "
                "is counted there")
        if h.finding.bytes_per_step >= HIGH_BYTES_PER_STEP:
            h.finding.severity = Severity.HIGH.value
    if total_own <= 0 or measured > FASTER * total_own:
        _explain_excess(data, group, measured, total_own, onset)


def _explain_excess(data: RunData, group: list[HolderFinding], measured: float,
                    total_own: float, onset: float) -> None:
    """The holders explain little of the growth: say what the heap shows instead."""
    cause = classify(data, measured, max(onset, warmup_steps(data.steps)), float(data.steps))
    top = max(group, key=lambda h: h.finding.bytes_per_step or 0.0)
    finding = top.finding
    ratio = f"{measured / total_own:.0f}x" if total_own > 0 else "far"
    finding.evidence.append(f"the process grows {format_bytes(measured, signed=True)}/step, "
                            f"{ratio} faster than the named holders' own "
                            f"{format_bytes(total_own, signed=True)}/step")
    finding.evidence.extend(cause.evidence)
    if cause.kind in (K.ALLOCATOR_RETENTION, K.NATIVE_MEMORY):
        finding.cause = cause.kind
        name = finding.holder_name or "it"
        advice = advice_for(cause.kind, name, str(data.meta.get("script") or "SCRIPT"))
        # The holder's own fix first (it stops what it keeps), then what stops the rest.
        finding.fix = (f"{finding.fix.rstrip('.')}. "
                       + RETENTION_PREFIX[cause.kind].replace("{name}", name) + advice.fix)
        finding.pattern, finding.pattern_title = advice.pattern.anchor, advice.pattern.title
        if finding.severity == Severity.LOW:
            finding.severity = Severity.MEDIUM.value


def _per_epoch(h: HolderFinding) -> None:
    if h.steps_per_epoch and h.finding.bytes_per_step is not None:
        h.finding.bytes_per_epoch = round(h.finding.bytes_per_step * h.steps_per_epoch, 1)
