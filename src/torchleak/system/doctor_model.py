"""What ``torchleak doctor`` finds: checks, proposed changes, and the exit code."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from torchleak.system.gpu import GpuInventory
from torchleak.system.limits import CgroupMemory, MachineMemory

STATUSES = ("ok", "warn", "fail")
EXIT_OK = 0
EXIT_PROBLEMS = 1  # a failed check, or a warning with --strict


@dataclass(frozen=True)
class Check:
    name: str
    status: str  # ok | warn | fail
    value: str  # what was measured, in words
    why: str  # why it matters for a training run's memory
    fix: str = ""  # what to change ("" when nothing needs to)
    data: dict[str, Any] = field(default_factory=dict)  # the raw figures, for --json

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "status": self.status, "value": self.value,
                "why": self.why, "fix": self.fix or None, "data": self.data}


@dataclass(frozen=True)
class Proposal:
    """A change ``doctor`` proposes (ready to paste): it may change speed or results, so
    it is the user's to make."""

    where: str  # "train.py:42" for a line of the script, "shell" or "environment"
    change: str  # the text to paste
    saving: str  # the measured or estimated saving, in words
    reason: str

    def to_dict(self) -> dict[str, str]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class Machine:
    """The facts the checks read, gathered once."""

    memory: MachineMemory
    cgroup: CgroupMemory | None
    gpus: GpuInventory
    torch: dict[str, Any]


@dataclass
class DoctorReport:
    checks: list[Check]
    proposals: list[Proposal] = field(default_factory=list)
    script: dict[str, Any] | None = None  # what was read from the script
    diagnostics: list[dict[str, Any]] = field(default_factory=list)  # its static check

    def count(self, status: str) -> int:
        return sum(1 for c in self.checks if c.status == status)

    def exit_code(self, strict: bool = False) -> int:
        if self.count("fail") or (strict and self.count("warn")):
            return EXIT_PROBLEMS
        return EXIT_OK

    def to_dict(self, strict: bool = False) -> dict[str, Any]:
        return {"checks": [c.to_dict() for c in self.checks],
                "proposals": [p.to_dict() for p in self.proposals],
                "script": self.script, "diagnostics": self.diagnostics,
                "summary": {s: self.count(s) for s in STATUSES},
                "exit_code": self.exit_code(strict)}
