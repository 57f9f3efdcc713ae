"""Fixtures for the attach tests: folders another user can reach, and an in-process
Monitor whose training loop runs on a thread of its own."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from .attachkit import LoopThread


@pytest.fixture
def open_folder() -> Iterator[Path]:
    """A folder every user may traverse (pytest's own temporary folders are 0700), so a
    test can show that the socket's own mode and the peer check keep others out."""
    folder = Path(tempfile.mkdtemp(prefix="torchleak-attach-test-"))
    folder.chmod(0o755)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


Served = tuple[Any, LoopThread]  # (Monitor, its loop)


@pytest.fixture
def served(open_folder: Path, monkeypatch: pytest.MonkeyPatch
           ) -> Iterator[Callable[..., Served]]:
    """``served(control=None, env=None) -> (monitor, loop)``: a Monitor recording a loop
    thread that steps every 10 ms; stopped at the end of the test."""
    from torchleak.live.engine import Monitor, MonitorOptions

    started: list[tuple[Monitor, LoopThread]] = []

    def serve(control: bool | None = None, env: str | None = None) -> Served:
        if env is None:
            monkeypatch.delenv("TORCHLEAK_CONTROL", raising=False)
        else:
            monkeypatch.setenv("TORCHLEAK_CONTROL", env)
        monitor = Monitor(MonitorOptions(out=open_folder / f"run{len(started)}", quiet=True,
                                         control=control, name="loop"))
        monitor.start()
        loop = LoopThread().start()
        started.append((monitor, loop))
        loop.wait_steps(3)
        return monitor, loop

    yield serve
    for monitor, loop in started:
        loop.stop()
        monitor.stop("finished", 0, analyse=False)
    os.environ.pop("TORCHLEAK_CONTROL", None)
