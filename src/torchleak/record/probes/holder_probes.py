"""The holder walk and the quick re-measure of its suspects, as scheduled probes.

The walk (``holders.HolderWalker``, ~1-5 ms) names what holds memory from every root;
holders that grew between two walks become suspects, which the quick re-measure
(~10-50 us each) samples densely in between. Both are run by the recorder, which also
asks for walks at phase ends, on growth no holder explains and to confirm a live
suspicion (``reason``); they share one walker (its bounded memory of routes and sizes).
"""

from __future__ import annotations

import json
import time
from typing import Any

from torchleak.record.probe import Cost, Probe, ProbeContext
from torchleak.record.probes.heap import HeapProbe
from torchleak.record.probes.holders import HolderSample, HolderWalker
from torchleak.record.schedule import MAX_SUSPECTS
from torchleak.trace import tables

MAX_REMEMBERED_SIZES = 4096


def holder_row(step: int, s: HolderSample) -> tuple[Any, ...]:
    return tables.HOLDERS.row(
        step=step, holder=s.holder, kind=s.kind, type_name=s.type_name, length=s.length,
        bytes=s.bytes, tensors=s.tensors, tensor_bytes=s.tensor_bytes,
        grad_fn_tensors=s.grad_fn_tensors, graph_nodes=s.graph_nodes,
        detail=json.dumps(s.detail, default=str) if s.detail else None)


class HolderWalk(Probe):
    name = "holders"
    tables = (tables.HOLDERS, tables.HOLDER_WALKS, tables.HEAP_SAMPLES)
    cost = Cost(share=0.45, expected_seconds=0.002, min_gap_steps=1)

    def __init__(self) -> None:
        self.walker = HolderWalker()
        self.suspects: list[str] = []
        self._heap = HeapProbe()
        self._last_sizes: dict[str, float] = {}

    def run(self, ctx: ProbeContext) -> None:
        start = time.perf_counter()
        samples = self.walker.walk(ctx.frame)
        self._update_suspects(samples)
        for s in samples + self.walker.native:
            ctx.emit(tables.HOLDERS, holder_row(ctx.step, s))
        # The heap's split at the same step: fast loops outrun the background sampler.
        heap = self._heap.sample()
        ctx.emit(tables.HEAP_SAMPLES, (ctx.step, time.time(), heap.py_blocks,
                                       heap.malloc_in_use, heap.malloc_free,
                                       heap.malloc_mmapped))
        ctx.emit(tables.HOLDER_WALKS, (ctx.step, "full", ctx.reason,
                                       (time.perf_counter() - start) * 1000, len(samples)))

    def _update_suspects(self, samples: list[HolderSample]) -> None:
        """Holders that grew since the previous walk (or always can: hooks, caches)."""
        grown: dict[str, float] = {}
        seen_before = bool(self._last_sizes)
        for s in samples:
            size = float(s.graph_nodes or s.length)
            before = self._last_sizes.get(s.holder)
            if before is None and seen_before:
                before = 0.0  # new since the last walk: it grew from empty (a mid-run onset)
            if s.kind in ("hooks", "cache") or (before is not None and size > before):
                grown[s.holder] = size - (before or 0.0)
            elif s.holder in self.suspects and before is not None and size >= before:
                grown[s.holder] = 0.0
            self._last_sizes.pop(s.holder, None)
            self._last_sizes[s.holder] = size
        while len(self._last_sizes) > MAX_REMEMBERED_SIZES:
            del self._last_sizes[next(iter(self._last_sizes))]
        ranked = sorted(grown, key=grown.__getitem__, reverse=True)
        self.suspects = ranked[:MAX_SUSPECTS]


class QuickRemeasure(Probe):
    """The suspects again, found by their routes (or the holders a live suspicion names:
    ``paths``), without a whole walk."""

    name = "quick"
    tables = (tables.HOLDERS, tables.HOLDER_WALKS)
    cost = Cost(share=0.42, expected_seconds=0.0002, min_gap_steps=1)

    def __init__(self, walk: HolderWalk) -> None:
        self._walk = walk
        self.paths: list[str] | None = None  # None: the walk's own suspects

    def run(self, ctx: ProbeContext) -> None:
        start = time.perf_counter()
        paths = self._walk.suspects if self.paths is None else self.paths
        samples = self._walk.walker.remeasure(ctx.frame, paths)
        for s in samples:
            ctx.emit(tables.HOLDERS, holder_row(ctx.step, s))
        ctx.emit(tables.HOLDER_WALKS, (ctx.step, "quick", ctx.reason,
                                       (time.perf_counter() - start) * 1000, len(samples)))
