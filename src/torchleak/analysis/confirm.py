"""Suspected or called: the evidence a live leak call needs that warm-up cannot produce.

While the run is alive the same analysis as the final report finds growth early; much of
what grows early stops by itself (a cache filling once, a bounded buffer, optimizer
state, a list emptied at the epoch's end, a model grown in stages). A finding found
live is therefore only *suspected* until its growth shows one of:

- **past an epoch boundary**: the run has epochs (``mark("epoch")``, validation ends, a
  DataLoader iterated again) and the growth went on past the first boundary after it
  began, without being emptied there, for at least ``AFTER_EPOCH_SHARE`` of an epoch
  and ``MIN_AFTER_EPOCH`` steps, at ``KEEP_PACE`` of its earlier pace;
- **its span doubled**: with no epoch boundary after the growth began at ``onset``, the
  growth has gone on for at least twice ``MIN_DOUBLING_STEPS`` (twice
  ``MIN_DOUBLING_STEPS_IN_EPOCH`` while a DataLoader's first epoch is still running), and
  the later half of that span rose at ``KEEP_PACE`` of the pace before it, in
  ``MIN_RISES`` separate rises and in both of its halves (a model grown in a few stages
  rises once or twice).

Growth of the process that no holder names is not called while holders bounded by
construction (``deque(maxlen=…)``, ``lru_cache(maxsize=…)``) grow with it: they stop at
their bound. Only a called finding warns on stderr, fires ``on_leak`` and lets the
guard act on a projection.
"""

from __future__ import annotations

from collections.abc import Sequence

from torchleak.analysis.series import RunData
from torchleak.analysis.signals import explained_by_bounded
from torchleak.analysis.trend import judge
from torchleak.report import Finding
from torchleak.vocab import FindingKind

KEEP_PACE = 0.5  # the later growth keeps at least this share of the earlier pace
KEEP_PACE_EXACT = 0.75  # ... for exact counts, which carry no noise, also in its last quarter
MIN_RISES = 3
MIN_AFTER_EPOCH = 4  # steps of growth past the epoch boundary, at least
AFTER_EPOCH_SHARE = 0.5  # ... and this share of an epoch
MIN_DOUBLING_STEPS = 80  # 160 steps of growth at least: a buffer flushed every 150 is not called
MIN_DOUBLING_STEPS_IN_EPOCH = 1000  # a DataLoader's first epoch may end with a .clear()


def confirmation(data: RunData, finding: Finding, steps: Sequence[float],
                 values: Sequence[float], onset: float, exact: bool) -> str | None:
    """Why ``finding`` is called now, or None while it is only suspected. ``steps`` and
    ``values`` are the series it was judged on (a holder's count or bytes, a signal's
    samples), ``onset`` the step its growth began."""
    now = float(data.steps)
    pts = [(s, v) for s, v in zip(steps, values) if s <= now]
    if len(pts) < 2:
        return None
    if not finding.holder_path and explained_by_bounded(
            data, _rise(pts, onset, now) / max(1.0, now - onset), onset, now):
        return None
    workers = finding.kind == FindingKind.WORKER_MEMORY
    boundary = next((e for e in data.epoch_ends() if e > onset), None)
    if boundary is not None:
        if workers:  # the workers' growth (their copies of the dataset) outlived an epoch
            return f"the workers kept it past the epoch end at step {boundary}"
        return _past_epoch(data, pts, onset, float(boundary), now, exact, finding.per_epoch)
    floor = MIN_DOUBLING_STEPS_IN_EPOCH if data.loader_started() else MIN_DOUBLING_STEPS
    if now - onset < 2 * floor:
        return None
    if workers:
        return f"the workers kept it from step {onset:.0f} to {now:.0f}"
    return _doubled(pts, onset, now, exact)


def _past_epoch(data: RunData, pts: list[tuple[float, float]], onset: float, end: float,
                now: float, exact: bool, per_epoch: bool) -> str | None:
    ends = data.epoch_ends()
    epoch = (ends[-1] - ends[0]) / (len(ends) - 1) if len(ends) >= 2 else end
    if now - end < max(MIN_AFTER_EPOCH, AFTER_EPOCH_SHARE * epoch):
        return None
    before_end = _value_at(pts, end - 1)
    after = [v for s, v in pts if s >= end]
    if not after or min(after) < 0.5 * before_end:
        return None  # emptied at the boundary: a per-epoch cost
    reason = f"kept growing past the epoch end at step {end:.0f}"
    if per_epoch:  # it grows once an epoch: it grew at two of them, never emptied
        rises = sum(1 for (_s0, v0), (_s1, v1) in zip(pts, pts[1:]) if v1 > v0)
        return reason if rises >= 2 and _value_at(pts, now) > before_end else None
    if not _kept_pace(pts, onset, end - 1, now, exact):
        return None
    return reason


def _doubled(pts: list[tuple[float, float]], onset: float, now: float,
             exact: bool) -> str | None:
    half = onset + (now - onset) / 2
    recent = [v for s, v in pts if s > half]
    if min(recent, default=0.0) < 0.5 * _value_at(pts, half):
        return None  # emptied in the last half
    if not _kept_pace(pts, onset, half, now, exact):
        return None
    return (f"kept its pace from step {half:.0f} to {now:.0f} (its span doubled since it "
            "was first seen)")


def _kept_pace(pts: list[tuple[float, float]], onset: float, split: float, now: float,
               exact: bool) -> bool:
    """The growth after ``split`` keeps ``KEEP_PACE`` of its pace before: over the whole
    later span, in each of its halves and (exact counts) in its last quarter where samples
    lie there (a ramp or a fill that ends early does not), in ``MIN_RISES`` separate rises
    (a model grown in a few stages rises once or twice). Rates are read between samples:
    holders are sampled sparsely, and a span with no sample of its own says nothing."""
    before = _rate(pts, onset, split)
    later = _rate(pts, split, now)
    if before is None or before <= 0 or later is None:
        return False
    middle = split + (now - split) / 2
    spans = [(split, middle), (middle, now)]
    if exact:
        spans.append((now - (now - split) / 4, now))
    rates = [later] + [r for r in (_rate(pts, a, b) for a, b in spans) if r is not None]
    keep = KEEP_PACE_EXACT if exact else KEEP_PACE
    if min(rates) < keep * before:
        return False
    if exact:
        rises = sum(1 for (_s0, v0), (s1, v1) in zip(pts, pts[1:]) if s1 > split and v1 > v0)
        return rises >= MIN_RISES
    return _still_growing(pts, split, now)


def _still_growing(pts: list[tuple[float, float]], start: float, end: float) -> bool:
    """A noisy memory signal: the trend test on the later span alone."""
    later = [(s, v) for s, v in pts if start <= s <= end]
    if len(later) < 5:
        return _rise(pts, start, end) > 0
    xs, ys = [p[0] for p in later], [p[1] for p in later]
    return judge(xs, ys, warmup=start - 1, min_growth=0.0, windows=min(20, len(xs))).growing


def _value_at(pts: list[tuple[float, float]], step: float) -> float:
    """The last value at or before ``step`` (the first one when none is)."""
    found = pts[0][1]
    for s, v in pts:
        if s > step:
            break
        found = v
    return found


def _rise(pts: list[tuple[float, float]], start: float, end: float) -> float:
    return _value_at(pts, end) - _value_at(pts, start)


def _rate(pts: list[tuple[float, float]], start: float, end: float) -> float | None:
    """Growth per step between the samples that bound ``start`` and ``end`` (the last at
    or before each; the first sample when none is before ``start``); None when no sample
    lies after the first one within the span."""
    first = next((p for p in reversed(pts) if p[0] <= start), pts[0])
    last = next((p for p in reversed(pts) if p[0] <= end), None)
    if last is None or last[0] <= max(first[0], start):
        return None  # no sample of the span's own
    return (last[1] - first[1]) / (last[0] - first[0])


