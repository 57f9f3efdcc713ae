"""The words torchleak's layers share: verdicts, severities, finding kinds, run statuses.

Each vocabulary is a ``str`` enum, so a value compares equal to its plain string and
serialises to JSON as that string: ``Verdict.LEAK == "leak"``.
"""

from __future__ import annotations

from enum import Enum


class Verdict(str, Enum):
    LEAK = "leak"
    NO_LEAK = "no_leak"
    INCONCLUSIVE = "inconclusive"

    def __str__(self) -> str:
        return self.value

    @property
    def words(self) -> str:
        """How people read it: "no leak" (the value is for scripts)."""
        return self.value.replace("_", " ")


def verdict_words(verdict: str) -> str:
    """A verdict in words; anything else ("-", "not analysed") as it is."""
    try:
        return Verdict(verdict).words
    except ValueError:
        return verdict


class Severity(str, Enum):
    HIGH = "high"
    MEDIUM = "medium"
    LOW = "low"

    def __str__(self) -> str:
        return self.value

    @property
    def serious(self) -> bool:
        return self is not Severity.LOW

    @property
    def rank(self) -> int:
        return {"high": 0, "medium": 1, "low": 2}[self.value]


class RunStatus(str, Enum):
    RUNNING = "running"
    FINISHED = "finished"  # the script returned (any exit code)
    CRASHED = "crashed"  # the script raised
    KILLED = "killed"  # the process died without ending the trace (signal, OOM killer)
    STOPPED = "stopped"  # the guard ended the training before the memory limit

    def __str__(self) -> str:
        return self.value


class FindingKind(str, Enum):
    """What grows. Holder kinds name a container or registry; signal kinds a process signal."""

    AUTOGRAD_GRAPH = "autograd_graph"  # a tensor whose graph gets deeper every step
    TENSOR_LIST_GRAPH = "tensor_list_graph"  # a container of tensors that keep their graph
    TENSOR_LIST = "tensor_list"  # a container of tensors
    TENSOR_GROWTH = "tensor_growth"  # one tensor or array that grows (cat, resize)
    CONTAINER = "container"  # a container of Python objects
    BUFFER = "buffer"  # one object whose own size grows: bytearray, str, BytesIO
    METRIC_STATE = "metric_state"
    HOOKS = "hooks"
    CACHE = "cache"
    FIGURES = "figures"
    WORKER_MEMORY = "worker_memory"
    FRAGMENTATION = "fragmentation"
    ALLOCATOR_RETENTION = "allocator_retention"  # freed memory the C allocator keeps
    NATIVE_MEMORY = "native_memory"  # memory outside Python objects and tensors
    MEMORY = "memory"  # growth nothing explains yet
    TENSORS = "tensors"  # live tensors grow with no named holder

    def __str__(self) -> str:
        return self.value


class Signal(str, Enum):
    """The measured memory series a finding explains."""

    MAIN_USS = "main_uss"
    WORKERS_USS = "workers_uss"
    CUDA_ALLOCATED = "cuda_allocated"
    CUDA_RESERVED_UNUSED = "cuda_reserved_unused"

    def __str__(self) -> str:
        return self.value


SERIOUS = (Severity.HIGH, Severity.MEDIUM)
