"""What an attach command does on the training thread, and how it is handed over.

A ``Job`` is queued with ``Recorder.request`` and runs at the next step boundary, on the
training thread. The server thread waits for it with a timeout. A job that has not
started when its waiter gives up (or the run ends, or the client cancels) is cancelled
and never runs; one that has started runs to its end, and its result is logged in the
trace (events, kind 'attach') like every other command's.
"""

from __future__ import annotations

import sys
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

from torchleak.live.control_protocol import truncate

if TYPE_CHECKING:
    from torchleak.record.session import Recorder

Action = Callable[[FrameType | None], dict[str, Any]]
MAX_LOGGED = 1000  # characters of one command's line in the trace's events
MAX_HOLDERS = 25  # holders a walk sends back, largest first

PENDING, RUNNING, DONE, CANCELLED = "pending", "running", "done", "cancelled"


class Job:
    """One command for the training thread: pending -> running -> done, or cancelled."""

    def __init__(self, op: str, action: Action, title: str,
                 log: Callable[[str], None], step: Callable[[], int]) -> None:
        self.op = op
        self.title = title  # how the trace names it: "eval 'len(history)'"
        self._action = action
        self._log = log
        self._step = step
        self._lock = threading.Lock()
        self.done = threading.Event()
        self.state = PENDING
        self.why: str = ""  # why it was cancelled
        self.result: dict[str, Any] = {}
        self.requested_at = time.perf_counter()
        self.requested_step = step()
        self.waited_ms = 0.0  # from the request to the boundary that ran it
        self.abandoned = False  # nobody waits for the answer any more

    def __call__(self, frame: FrameType | None) -> None:
        """At a step boundary, on the training thread (``Recorder.request``)."""
        with self._lock:
            if self.state != PENDING:
                return  # cancelled: it must not run late
            self.state = RUNNING
        start = time.perf_counter()
        self.waited_ms = (start - self.requested_at) * 1000.0
        result: dict[str, Any] = {"ok": False, "summary": "interrupted",
                                  "error": "interrupted (KeyboardInterrupt) on the training "
                                           "thread"}
        try:
            result = self._action(frame)
        except Exception as err:  # noqa: BLE001 - never into the training loop
            result = {"ok": False, "error": "".join(traceback.format_exception(err))}
        finally:  # a Ctrl-C of the program's own goes on into it, answered for here
            self._finish(result, start)

    def _finish(self, result: dict[str, Any], start: float) -> None:
        result.update(step=self._step(), ms=round((time.perf_counter() - start) * 1000, 3),
                      waited_ms=round(self.waited_ms, 3))
        self.result = result
        with self._lock:
            self.state = DONE
            late = self.abandoned
        self._log(self._line(late))
        self.done.set()

    def cancel(self, why: str) -> bool:
        """Cancel if it has not started; False when it runs (or ran) already."""
        with self._lock:
            if self.state != PENDING:
                self.abandoned = True
                return False
            self.state = CANCELLED
            self.why = why
        self._log(f"{self.title} -> cancelled, never ran: {why}")
        self.done.set()
        return True

    def _line(self, late: bool) -> str:
        r = self.result
        text = f"{self.title} -> {r.get('summary') or ('ok' if r.get('ok') else 'failed')}"
        text += f" ({r.get('ms', 0):.3g} ms, {self.waited_ms:.0f} ms after the request)"
        if late:
            text += "; the client had stopped waiting"
        for key in ("result", "stdout", "stderr", "error"):
            if r.get(key):  # one line per event, as the code itself is shown
                text += f" | {key}: " + r[key].strip().replace("\n", "\\n")
        return truncate(text, MAX_LOGGED)


def eval_action(code: str) -> Action:
    # Imported when asked (like cleanup_in_process): a run nobody attaches to never pays
    # for them at start-up.
    from torchleak.live.control_eval import evaluate

    def run(frame: FrameType | None) -> dict[str, Any]:
        result = evaluate(code, frame)
        error = (result.get("error") or "").strip().splitlines()
        result["summary"] = "ok" if result["ok"] else f"raised {error[-1] if error else '?'}"
        return result

    return run


def walk_action(recorder: Recorder) -> Action:
    def run(frame: FrameType | None) -> dict[str, Any]:
        if not recorder.torch_attached:
            return {"ok": False, "summary": "no walk: torch not imported yet",
                    "error": "no holder walk yet: the program has not imported torch"}
        start = time.perf_counter()
        # An emptied container is recorded for the analysis (released), never shown as a
        # holder of memory now.
        samples = [s for s in recorder.walk_now(frame) if s.length or s.bytes]
        ms = (time.perf_counter() - start) * 1000.0
        largest = sorted(samples, key=lambda s: s.bytes, reverse=True)[:MAX_HOLDERS]
        holders = [{"holder": s.holder, "kind": s.kind, "type_name": s.type_name,
                    "length": s.length, "bytes": s.bytes, "tensors": s.tensors,
                    "tensor_bytes": s.tensor_bytes, "graph_nodes": s.graph_nodes}
                   for s in largest]
        top = f"; largest {holders[0]['holder']}" if holders else ""
        return {"ok": True, "holders": holders, "walked": len(samples),
                "walk_ms": round(ms, 3), "summary": f"{len(samples)} holders{top}"}

    return run


def snapshot_action(recorder: Recorder, folder: Path) -> Action:
    def run(frame: FrameType | None) -> dict[str, Any]:
        if not recorder.torch_attached:
            return {"ok": False, "summary": "no snapshot: torch not imported yet",
                    "error": "no snapshot yet: the program has not imported torch"}
        recorder.snapshot(frame, "attach")
        try:
            cuda, failed = _cuda_snapshot(folder, recorder.step), None
        except Exception as err:  # noqa: BLE001 - the walk and census are in already
            cuda, failed = None, f"CUDA allocator snapshot failed: {type(err).__name__}: {err}"
        done = "holder walk and census" + (f", CUDA allocator snapshot {cuda}" if cuda else "")
        return {"ok": True, "cuda_snapshot": cuda, "cuda_error": failed,
                "summary": done + (f"; {failed}" if failed else "")}

    return run


def cleanup_action(recorder: Recorder) -> Action:
    from torchleak.live.control_cleanup import cleanup_in_process

    def run(frame: FrameType | None) -> dict[str, Any]:
        return {"ok": True, **cleanup_in_process(recorder, frame)}

    return run


def _cuda_snapshot(folder: Path, step: int) -> str | None:
    """The caching allocator's segments and blocks (pytorch.org/memory_viz reads the
    file), when the program uses CUDA; never initialises CUDA itself."""
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    from torchleak.record.probes.cuda import cuda_in_use

    if not cuda_in_use():
        return None
    import pickle

    path = folder / f"cuda-snapshot-step{step}.pickle"
    data = torch.cuda.memory._snapshot()
    with open(path, "wb") as handle:
        pickle.dump(data, handle)
    return str(path)
