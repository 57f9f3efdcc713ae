"""The leak-pattern catalogue: one entry per pattern, each with a stable anchor.

Both the runtime findings and the static checker name patterns from here, and every
entry has a section in ``docs/patterns.md`` under the same anchor (a test keeps the two
in step), so a finding can link the page a user reads next.
"""

from __future__ import annotations

from dataclasses import dataclass

DOC_PAGE = "docs/patterns.md"


@dataclass(frozen=True)
class Pattern:
    anchor: str
    title: str

    @property
    def link(self) -> str:
        return f"{DOC_PAGE}#{self.anchor}"


_ALL = (
    Pattern("tensor-accumulator", "A loss or metric summed as a tensor"),
    Pattern("graph-in-container", "Outputs or losses stored with their autograd graph"),
    Pattern("tensors-in-containers", "Tensors kept in a list or dict that is never cleared"),
    Pattern("step-outputs", "Per-step outputs collected in a hook and never cleared"),
    Pattern("unbounded-history", "A history list or dict that only grows"),
    Pattern("growing-model", "Parameters or modules added while training"),
    Pattern("growing-buffer", "One buffer that keeps growing: bytearray, str, BytesIO, array"),
    Pattern("thread-state", "A background thread that keeps what it receives"),
    Pattern("metric-state", "Metric objects that accumulate every update"),
    Pattern("hooks-every-step", "Hooks or callbacks registered every step"),
    Pattern("unbounded-cache", "An unbounded cache keyed by tensors or objects"),
    Pattern("figures-not-closed", "Plot figures that are never closed"),
    Pattern("retain-graph", "retain_graph or a carried state that chains graphs across steps"),
    Pattern("worker-copy-on-read", "DataLoader workers un-sharing a dataset of Python objects"),
    Pattern("allocator-retention", "Freed memory the C allocator keeps"),
    Pattern("native-memory", "Memory outside Python objects and tensors"),
    Pattern("cuda-fragmentation", "CUDA caching-allocator fragmentation"),
    Pattern("reference-cycles", "Reference cycles that only the cyclic collector frees"),
    Pattern("anomaly-mode", "Autograd anomaly detection left on"),
    Pattern("eval-without-no-grad", "Evaluation that builds autograd graphs"),
    Pattern("warning-registry", "Warnings with a per-step value in their message"),
    Pattern("interpreter-registry", "Interpreter tables that grow with use"),
    Pattern("autocast-cache", "A training loop inside one autocast block"),
    Pattern("profiler-left-on", "The profiler left recording"),
    Pattern("saved-tensor-hooks", "Saved-tensor hooks that keep what they pack"),
)

PATTERNS: dict[str, Pattern] = {p.anchor: p for p in _ALL}


def pattern(anchor: str) -> Pattern:
    """The catalogue entry for ``anchor`` (a KeyError names a typo at import time)."""
    return PATTERNS[anchor]
