"""The frames of every thread, read with the cyclic collector paused: on CPython 3.11 a
collection inside ``sys._current_frames()`` that frees a ``threading.local`` takes the lock
the call holds, and the training process hangs (seen in a holder walk)."""

from __future__ import annotations

import gc
import sys
import threading

import pytest

from torchleak.record.probes.access import current_frames


def test_current_frames_sees_other_threads_with_the_collector_paused_then_restored(
        monkeypatch: pytest.MonkeyPatch) -> None:
    started, release = threading.Event(), threading.Event()
    reading: list[bool] = []  # non-empty while sys._current_frames() runs
    inside: list[bool] = []  # per collection: whether it started during that read
    original = gc.callbacks[:]
    read = sys._current_frames

    def watched_read() -> dict[int, object]:
        reading.append(True)
        try:
            return read()
        finally:
            reading.pop()

    def watch(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            inside.append(bool(reading))

    def wait() -> None:
        started.set()
        release.wait(30)

    worker = threading.Thread(target=wait, daemon=True)
    worker.start()
    started.wait(30)
    was = gc.get_threshold()
    monkeypatch.setattr(sys, "_current_frames", watched_read)
    try:
        gc.set_threshold(1)  # any tracked allocation would start a collection
        gc.callbacks.append(watch)
        frames = current_frames()
        assert not any(inside)  # no collection ran while the frames were read
        assert worker.ident in frames and threading.get_ident() in frames
        assert gc.isenabled()  # restored
        gc.disable()
        current_frames()
        assert not gc.isenabled()  # left as it was found
    finally:
        gc.enable()
        gc.callbacks[:] = original
        gc.set_threshold(*was)
        release.set()
        worker.join(30)
