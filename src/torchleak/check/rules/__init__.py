"""Every rule, in code order. Add a rule here, in docs/check-rules.md and a fixture."""

from __future__ import annotations

from torchleak.check.rules.accumulate import GraphTensorStored, TensorAccumulated
from torchleak.check.rules.autograd import (
    AnomalyDetectionLeftOn,
    RetainGraphInLoop,
    RetainGraphWithCarriedState,
)
from torchleak.check.rules.base import Analysis, Finding, Rule
from torchleak.check.rules.caching import CacheKeepsObjectsAlive
from torchleak.check.rules.evaluation import EvalWithoutNoGrad
from torchleak.check.rules.figures import FigureNotClosed
from torchleak.check.rules.growth import ContainerGrowsEveryStep
from torchleak.check.rules.hooks import HookRegisteredPerStep
from torchleak.check.rules.lifetime import StepOutputsNotCleared, UnboundedHistory
from torchleak.check.rules.switches import (
    LoopInsideAutocast,
    ProfilerWithoutSchedule,
    WarningMessagePerStep,
)
from torchleak.check.rules.waste import (
    DefaultTensorTypeCuda,
    EmptyCachePerStep,
    ObjectConstructedPerStep,
)
from torchleak.check.rules.workers import DatasetPythonContainers

ALL_RULES: tuple[Rule, ...] = tuple(
    sorted(
        (
            TensorAccumulated(), GraphTensorStored(), StepOutputsNotCleared(),
            FigureNotClosed(), HookRegisteredPerStep(), AnomalyDetectionLeftOn(),
            ContainerGrowsEveryStep(), LoopInsideAutocast(), ProfilerWithoutSchedule(),
            WarningMessagePerStep(),
            RetainGraphWithCarriedState(), UnboundedHistory(), CacheKeepsObjectsAlive(),
            EvalWithoutNoGrad(), EmptyCachePerStep(), ObjectConstructedPerStep(),
            DefaultTensorTypeCuda(), RetainGraphInLoop(), DatasetPythonContainers(),
        ),
        key=lambda r: r.code,
    )
)

# Diagnostics of the checker itself (not rules: they are never switched off by --select).
META_CODES: dict[str, str] = {
    "TL000": "internal error in a rule (the other rules still ran); please report it",
    "TL001": "file could not be read or decoded",
    "TL002": "file could not be parsed (syntax error)",
    "TL003": "notebook is not valid JSON or not a notebook",
}

__all__ = ["ALL_RULES", "META_CODES", "Analysis", "Finding", "Rule"]
