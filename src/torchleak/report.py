"""The Report: one saveable object that every renderer and the CLI use.

Its JSON form is the zoo's tool contract (``verdict``, ``steps``, ``findings`` with
``kind``, ``culprit``, ``bytes_per_step``, ``detected_at_step``, ``severity``, ``fix``),
extended with evidence a person needs to trust the verdict.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

VERDICTS = ("leak", "no_leak", "inconclusive")
SEVERITIES = ("high", "medium", "low")


@dataclass
class OomProjection:
    limit_bytes: int  # the real limit: cgroup, RAM or GPU total
    limit_name: str  # 'cgroup memory.max' | 'RAM' | 'cuda:0 total'
    current_bytes: int
    steps_to_oom: float | None  # None: not growing towards it
    seconds_to_oom: float | None


@dataclass
class Finding:
    kind: str  # e.g. 'tensor_growth', 'container_growth', 'autograd_graph', 'hooks', ...
    culprit: str  # the holder, as a person reads it: 'Trainer.train_outputs (list)'
    severity: str  # high | medium | low
    fix: str
    signal: str = ""  # the memory signal that grows: main_uss | workers_uss | cuda_allocated ...
    bytes_per_step: float | None = None
    objects_per_step: float | None = None
    per_epoch: bool = False  # growth happens once per epoch (rates then per epoch too)
    bytes_per_epoch: float | None = None
    detected_at_step: int | None = None
    retained_bytes: int | None = None
    holder_path: str | None = None  # referrer path from a user-visible root
    source: str | None = None  # file:line that adds to it, when found
    pattern: str | None = None  # docs/leak-patterns anchor, e.g. '2. Losses/outputs ...'
    evidence: list[str] = field(default_factory=list)
    oom: OomProjection | None = None


@dataclass
class Signal:
    """One memory series as the analysis judged it (for plots and the terminal)."""

    name: str
    unit: str
    verdict: str  # growing | healthy | plateau | noisy | insufficient
    slope_per_step: float | None = None
    start_value: float | None = None
    end_value: float | None = None
    note: str = ""


@dataclass
class Report:
    verdict: str
    steps: int
    findings: list[Finding] = field(default_factory=list)
    signals: list[Signal] = field(default_factory=list)
    reason: str = ""  # why inconclusive / a one-line summary
    run: dict[str, Any] = field(default_factory=dict)  # name, script, status, times

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent, default=str)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Report:
        findings = []
        for f in data.get("findings", []):
            f = dict(f)
            oom = f.pop("oom", None)
            findings.append(Finding(**f, oom=OomProjection(**oom) if oom else None))
        signals = [Signal(**s) for s in data.get("signals", [])]
        return cls(
            verdict=data.get("verdict", "inconclusive"),
            steps=int(data.get("steps", 0)),
            findings=findings,
            signals=signals,
            reason=data.get("reason", ""),
            run=dict(data.get("run", {})),
        )

    @classmethod
    def from_json(cls, text: str) -> Report:
        return cls.from_dict(json.loads(text))
