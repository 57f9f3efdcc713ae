"""Load a benchmark script (``benchmarks/`` holds scripts, not a package) as a module."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def load_benchmark(relative: str, name: str) -> ModuleType:
    """``benchmarks/<relative>`` imported under ``name`` (not run as ``__main__``)."""
    spec = importlib.util.spec_from_file_location(name, BENCHMARKS / relative)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
