"""The frames of every thread, read with the cyclic collector paused: on CPython 3.11 a
collection inside ``sys._current_frames()`` that frees a ``threading.local`` takes the lock
the call holds, and the training process hangs (seen in a holder walk)."""

from __future__ import annotations

import gc
import sys
import threading

from torchleak.record.probes.access import current_frames


def test_current_frames_sees_other_threads_with_the_collector_paused_then_restored() -> None:
    started, release = threading.Event(), threading.Event()
    seen: list[bool] = []
    original = gc.callbacks[:]

    def watch(phase: str, info: dict[str, int]) -> None:
        frame = sys._getframe(1)
        while frame is not None:  # a collection started inside the read
            seen.append(frame.f_code.co_name == "current_frames")
            frame = frame.f_back

    def wait() -> None:
        started.set()
        release.wait(30)

    worker = threading.Thread(target=wait, daemon=True)
    worker.start()
    started.wait(30)
    was = gc.get_threshold()
    try:
        gc.set_threshold(1)  # any tracked allocation would start a collection
        gc.callbacks.append(watch)
        frames = current_frames()
        assert not any(seen)  # no collection ran while the frames were read
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
