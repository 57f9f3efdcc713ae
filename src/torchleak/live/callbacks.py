"""The user's callbacks: ``torchleak.on_leak(fn)`` and ``torchleak.on_guard(fn)``.

They are registered for the process (a decorator at import time works before any run
starts) and called by whichever monitor is active. A callback that raises is reported
once on stderr and in the trace, and never stops training.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

LeakCallback = Callable[[Any], Any]  # receives a report.Finding
GuardCallback = Callable[[Any], Any]  # receives a GuardEvent


@dataclass
class GuardEvent:
    """What the guard saw when it fired; passed to ``on_guard`` callbacks."""

    reason: str  # 'limit' (memory near the limit) | 'projection' (limit reached soon)
    mode: str  # warn | checkpoint | stop
    step: int
    memory_bytes: int
    limit_bytes: int
    limit_name: str
    seconds_to_limit: float | None
    run_folder: str
    finding: Any = None  # the top live finding, when there is one
    actions: list[str] = field(default_factory=list)


_lock = threading.Lock()
_leak: list[LeakCallback] = []
_guard: list[GuardCallback] = []


def add_leak_callback(fn: LeakCallback) -> None:
    with _lock:
        if fn not in _leak:
            _leak.append(fn)


def add_guard_callback(fn: GuardCallback) -> None:
    with _lock:
        if fn not in _guard:
            _guard.append(fn)


def leak_callbacks() -> list[LeakCallback]:
    with _lock:
        return list(_leak)


def guard_callbacks() -> list[GuardCallback]:
    with _lock:
        return list(_guard)


def clear() -> None:
    """Forget every callback (tests, notebooks re-running a cell)."""
    with _lock:
        _leak.clear()
        _guard.clear()
