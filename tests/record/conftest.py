"""Fixtures shared by the end-to-end recorder tests (tests/record).

Each real ``torchleak run`` pays seconds of torch import, so the recorded runs are
registered with ``recordkit.prefetch`` and started, a few at a time, when the session
starts; module fixtures read the shared results.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

# The helpers live beside this file; make them importable whatever pytest's import mode.
sys.path.insert(0, str(Path(__file__).parent))

from recordkit import RunPool  # noqa: E402

if importlib.util.find_spec("torch") is None:  # pragma: no cover - a hard dependency
    collect_ignore_glob = ["test_record_*.py"]

# 2 cores: three runs at once keeps both busy while one of them sleeps in its loop.
PARALLEL_RUNS = 3


@pytest.fixture(scope="session", autouse=True)
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunPool]:
    pool = RunPool(tmp_path_factory.mktemp("record"), workers=PARALLEL_RUNS)
    pool.start_all()
    yield pool
    pool.shutdown()


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Path:
    """One folder per test module for the quick runs that are not prefetched."""
    return tmp_path_factory.mktemp(request.module.__name__.rsplit(".", 1)[-1])
