"""The census as a scheduled probe: every live tensor (``census.take_census``) and the
split of the measured memory at the same moment (``breakdown``)."""

from __future__ import annotations

import sys
import time

from torchleak.record.probe import Cost, Probe, ProbeContext, register
from torchleak.trace import tables

# Measured ~0.08-0.2 us a live block; the best rate seen is kept (a busy machine's slow
# census must not cancel the next one).
FIRST_SECONDS_PER_BLOCK = 1.5e-7
TYPES_EVERY = 4  # every fourth scheduled census also counts objects by type


@register
class Census(Probe):
    name = "census"
    tables = (tables.CENSUS, tables.CENSUS_TENSORS, tables.CENSUS_TYPES, tables.BREAKDOWN)
    # Two censuses when growth is unexplained: tensor bytes flat or growing between them
    # tell native memory from tensors when the run is too short to pay for its anchors.
    cost = Cost(share=0.10, expected_seconds=0.08, min_gap_steps=10, hunt_runs=2)

    def __init__(self) -> None:
        self._seconds_per_block = FIRST_SECONDS_PER_BLOCK
        self._measured = False
        self._runs = 0
        self._host: object | None = None  # heap readings for the breakdown, made at first use

    def estimate(self) -> float:
        """Proportional to the Python heap (allocated blocks)."""
        return sys.getallocatedblocks() * self._seconds_per_block

    def run(self, ctx: ProbeContext) -> None:
        from torchleak.record.probes.census import take_census

        start = time.perf_counter()
        blocks = sys.getallocatedblocks()
        routine = ctx.reason in ("schedule", "anchor", "hunt")
        result = take_census(with_types=not routine or self._runs % TYPES_EVERY == TYPES_EVERY - 1)
        self._runs += 1
        facts = ctx.facts
        if facts.allowed("breakdown"):  # its readings are part of the census's cost
            facts.safely("breakdown", lambda: self._breakdown(ctx, result.categories))
        seconds = time.perf_counter() - start
        rate = seconds / max(1, blocks)
        self._seconds_per_block = min(rate, self._seconds_per_block) if self._measured else rate
        self._measured = True
        facts.latest_census = (ctx.step, result.tensors, result.tensor_bytes)
        # The census's scan list (one pointer per object), freed before the step resumes.
        facts.note_own_memory("census_scan_bytes", 8 * result.gc_objects)
        step = ctx.step
        ctx.emit(tables.CENSUS, (step, time.time(), seconds * 1000.0, ctx.reason,
                                 result.tensors, result.tensor_bytes, result.grad_fn_tensors,
                                 result.graph_nodes, result.graph_bytes, result.gc_objects))
        for (device, dtype), (count, nbytes) in result.by_device_dtype.items():
            ctx.emit(tables.CENSUS_TENSORS, (step, device, dtype, count, nbytes))
        for type_name, count in result.top_types:
            ctx.emit(tables.CENSUS_TYPES, (step, type_name, count))

    def _breakdown(self, ctx: ProbeContext, tensors: dict[str, int]) -> None:
        """Split the measured memory at this census (readings taken together, now that the
        census has freed its scan)."""
        from torchleak.record.probes.breakdown import HostReader, host_split, measure_cuda

        if self._host is None:
            self._host = HostReader()
        small, malloc_in_use = self._host.heap()  # type: ignore[attr-defined]
        facts = ctx.facts
        split = host_split(tensors, facts.uss(), facts.workers_uss, small, malloc_in_use)
        if facts.cuda_latest is not None:
            split.update(measure_cuda(tensors, facts.cuda_latest))
        for category, nbytes in split.items():
            ctx.emit(tables.BREAKDOWN, (ctx.step, category, nbytes))
