"""The probe contract: what a probe measures, when it may run, what it costs, what it emits.

A probe that runs at step boundaries when the scheduler grants it is one class:

    @register
    class OpenFiles(Probe):
        name = "open_files"                  # its name in the budget and in probe_costs
        tables = (tables.OPEN_FILES,)        # what it emits (declared in trace/tables.py)
        cost = Cost(share=0.03, expected_seconds=5e-5, min_gap_steps=10)

        def run(self, ctx: ProbeContext) -> None:
            ctx.emit(tables.OPEN_FILES, tables.OPEN_FILES.row(step=ctx.step, ...))

``register`` is the one line that wires it in: the recorder imports every module of
``torchleak.record.probes`` once torch is imported, and finds every registered probe; gives each its share of the overhead budget, runs it through one
path that times it and charges the time to that share, and switches it off (with an
event in the trace) the first time it raises. CONTRIBUTING.md ("Add a probe") walks through it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import FrameType
from typing import TYPE_CHECKING, Any, ClassVar

from torchleak.trace.tables import Table

if TYPE_CHECKING:
    from torchleak.record.facts import RecordingFacts


@dataclass(frozen=True)
class Cost:
    share: float  # of the recorder's overhead budget (the shares of all probes sum to 1)
    expected_seconds: float  # the first guess, replaced by what each run measures
    min_gap_steps: int = 1  # never two runs closer than this
    anchored: bool = True  # also runs at the anchor steps (docs/detection.md)
    # Runs owed, outside the budget, when the process grows and no holder explains it
    # (``Recorder.hunt``): what tells the growth's kind apart, paid only when asked.
    hunt_runs: int = 0


@dataclass
class ProbeContext:
    """What one run of a probe sees and may do."""

    step: int
    frame: FrameType | None  # the user's frame at the boundary (the training thread's)
    reason: str  # 'anchor' | 'schedule' | 'phase' | 'hunt' | 'confirm' | 'end' | 'request'
    emit: Callable[[Table, Sequence[Any]], None]
    facts: RecordingFacts  # the recording's readings a probe may use, and its notes


class Probe:
    name: ClassVar[str]
    tables: ClassVar[tuple[Table, ...]]
    cost: ClassVar[Cost]

    def estimate(self) -> float | None:
        """A fresh cost estimate in seconds before a run (None: the measured one holds)."""
        return None

    def run(self, ctx: ProbeContext) -> None:
        raise NotImplementedError


_REGISTERED: list[type[Probe]] = []


def register(probe: type[Probe]) -> type[Probe]:
    """Wire a probe class in (the recorder creates one instance per recording)."""
    if probe not in _REGISTERED:
        _REGISTERED.append(probe)
    return probe


def registered() -> list[type[Probe]]:
    """Every registered probe: the modules of ``torchleak.record.probes`` are imported
    (torch is in by then), and each ``register`` line adds its class."""
    import importlib
    import pkgutil

    from torchleak.record import probes

    for module in pkgutil.iter_modules(probes.__path__):
        importlib.import_module(f"{probes.__name__}.{module.name}")
    return list(_REGISTERED)
