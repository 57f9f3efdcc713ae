"""Helpers for the machine-facts tests: run a Python snippet in a fresh interpreter."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest


def run_python(code: str, *, env: dict[str, str] | None = None, timeout: float = 120,
               cwd: Path | None = None, unset: tuple[str, ...] = ()
               ) -> subprocess.CompletedProcess[str]:
    """Run ``code`` with this interpreter (``env`` added to ours, ``unset`` removed);
    the result, whatever its exit code."""
    full_env = {k: v for k, v in dict(os.environ, **(env or {})).items() if k not in unset}
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=full_env,
                          cwd=cwd, capture_output=True, text=True, timeout=timeout)


@pytest.fixture
def python() -> object:
    return run_python
