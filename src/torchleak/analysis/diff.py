"""Did the fix work? Two Reports side by side: verdicts, measured growth, holders that
appeared or went away, category changes, peaks, step time and torchleak's own cost.

Runs of different lengths compare by rate (bytes per step) and by their own peaks; runs
in progress compare as far as they have got (their Reports say so). B is *worse* than A
(``--fail-if-worse``) when any of these holds:

- B leaks where A did not (A's verdict is not ``leak``, B's is);
- a measured signal grows faster in B: B's growth exceeds A's by more than
  ``rate_share`` of A's (default 25%) and by at least ``MIN_RATE_DELTA`` (2 KiB/step),
  so noise on a flat run never counts;
- B peaks higher: B's peak main USS exceeds A's by more than ``peak_share`` (default
  10%) and by at least ``MIN_PEAK_DELTA`` (16 MiB).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from torchleak.analysis.holders import name_in_path
from torchleak.analysis.thresholds import MEDIUM_BYTES_PER_STEP, MIB
from torchleak.report import Finding, Report, Signal
from torchleak.vocab import Signal as S

MIN_RATE_DELTA = MEDIUM_BYTES_PER_STEP
MIN_PEAK_DELTA = 16 * MIB
COMPARED = (S.MAIN_USS.value, S.WORKERS_USS.value, S.CUDA_ALLOCATED.value,
            S.CUDA_RESERVED_UNUSED.value)


@dataclass
class Thresholds:
    rate_share: float = 0.25
    peak_share: float = 0.10


@dataclass
class Side:
    """One run as the diff sees it."""

    name: str
    trace: str
    status: str
    verdict: str
    steps: int
    findings: int  # serious ones
    step_ms: float | None
    overhead: dict[str, Any]


@dataclass
class SignalChange:
    signal: str
    a_slope: float | None  # bytes/step, as the analysis fitted it (flat runs included)
    b_slope: float | None
    a_verdict: str | None
    b_verdict: str | None
    a_peak: float | None
    b_peak: float | None

    @property
    def growth_a(self) -> float:
        return _growth(self.a_slope, self.a_verdict)

    @property
    def growth_b(self) -> float:
        return _growth(self.b_slope, self.b_verdict)


@dataclass
class HolderChange:
    key: str  # the holder path, or the finding's kind and signal when no holder is named
    name: str  # the identifier a person greps for
    culprit: str
    category: str | None
    a_rate: float | None
    b_rate: float | None


@dataclass
class CategoryChange:
    category: str
    a_last: float | None
    a_step: int | None
    b_last: float | None
    b_step: int | None
    a_rate: float | None
    b_rate: float | None

    @property
    def delta(self) -> float | None:
        if self.a_last is None or self.b_last is None:
            return None
        return self.b_last - self.a_last


@dataclass
class RunDiff:
    a: Side
    b: Side
    signals: list[SignalChange] = field(default_factory=list)
    gone: list[HolderChange] = field(default_factory=list)
    appeared: list[HolderChange] = field(default_factory=list)
    kept: list[HolderChange] = field(default_factory=list)
    categories: list[CategoryChange] = field(default_factory=list)
    peak_a: float | None = None  # main USS
    peak_b: float | None = None
    worse: bool = False
    reasons: list[str] = field(default_factory=list)  # why B is worse (empty: it is not)
    thresholds: Thresholds = field(default_factory=Thresholds)

    @property
    def peak_delta(self) -> float | None:
        if self.peak_a is None or self.peak_b is None:
            return None
        return self.peak_b - self.peak_a


def diff_reports(a: Report, b: Report, thresholds: Thresholds | None = None) -> RunDiff:
    limits = thresholds or Thresholds()
    result = RunDiff(_side(a), _side(b), thresholds=limits)
    result.signals = [_signal_change(name, a.signal(name), b.signal(name)) for name in COMPARED
                      if a.signal(name) is not None or b.signal(name) is not None]
    _holders(result, a, b)
    result.categories = _categories(a, b)
    main_a, main_b = a.signal(S.MAIN_USS.value), b.signal(S.MAIN_USS.value)
    result.peak_a = main_a.peak_value if main_a else None
    result.peak_b = main_b.peak_value if main_b else None
    result.reasons = _worse(result, limits)
    result.worse = bool(result.reasons)
    return result


def _side(report: Report) -> Side:
    return Side(name=str(report.run.get("name") or "run"), trace=str(report.run.get("trace")
                                                                     or ""),
                status=str(report.run.get("status") or "unknown"), verdict=report.verdict,
                steps=report.steps, findings=len(report.serious),
                step_ms=report.overhead.get("step_ms"), overhead=dict(report.overhead))


def _growth(slope: float | None, verdict: str | None) -> float:
    return max(0.0, slope or 0.0) if verdict == "growing" else 0.0


def _signal_change(name: str, a: Signal | None, b: Signal | None) -> SignalChange:
    return SignalChange(name, a.slope_per_step if a else None, b.slope_per_step if b else None,
                        a.verdict if a else None, b.verdict if b else None,
                        a.peak_value if a else None, b.peak_value if b else None)


def _holders(result: RunDiff, a: Report, b: Report) -> None:
    found_a = {holder_key(f): f for f in a.serious}
    found_b = {holder_key(f): f for f in b.serious}
    for key, finding in found_a.items():
        other = found_b.get(key)
        change = _holder_change(key, finding, other)
        (result.kept if other is not None else result.gone).append(change)
    result.appeared = [_holder_change(key, f, None, b_side=True) for key, f in found_b.items()
                       if key not in found_a]


def holder_key(finding: Finding) -> str:
    if finding.holder_path:
        return finding.holder_path
    return f"{finding.kind}:{finding.signal}"


def holder_name(finding: Finding) -> str:
    """``train().epoch_logits`` -> ``epoch_logits``; unnamed growth keeps its culprit."""
    if finding.holder_name:
        return finding.holder_name
    if finding.holder_path:  # a report written before findings carried the name
        return name_in_path(finding.holder_path) or finding.holder_path
    return finding.culprit.split(" (")[0].split(":")[0]


def _holder_change(key: str, finding: Finding, other: Finding | None,
                   b_side: bool = False) -> HolderChange:
    rate = finding.bytes_per_step
    other_rate = other.bytes_per_step if other is not None else None
    return HolderChange(key, holder_name(finding), finding.culprit, finding.category,
                        other_rate if b_side else rate, rate if b_side else other_rate)


def _categories(a: Report, b: Report) -> list[CategoryChange]:
    names = list(a.breakdown) + [n for n in b.breakdown if n not in a.breakdown]
    changes = []
    for name in names:
        pa, pb = a.breakdown.get(name) or [], b.breakdown.get(name) or []
        changes.append(CategoryChange(
            name, pa[-1][1] if pa else None, int(pa[-1][0]) if pa else None,
            pb[-1][1] if pb else None, int(pb[-1][0]) if pb else None,
            a.breakdown_rates.get(name), b.breakdown_rates.get(name)))
    return changes


def _worse(result: RunDiff, limits: Thresholds) -> list[str]:
    reasons = []
    if result.b.verdict == "leak" and result.a.verdict != "leak":
        reasons.append("B leaks where A did not")
    for change in result.signals:
        before, after = change.growth_a, change.growth_b
        if after - before > max(MIN_RATE_DELTA, limits.rate_share * before):
            reasons.append(f"{change.signal} grows faster in B")
    delta = result.peak_delta
    if delta is not None and result.peak_a is not None and delta > max(
            MIN_PEAK_DELTA, limits.peak_share * result.peak_a):
        reasons.append("B peaks higher")
    return reasons
