"""``cleanup()``: what each step frees, and what it says when nothing can be freed."""

from __future__ import annotations

import json
import sys
import types

import pytest

from torchleak.system import cleanup as cleanup_module
from torchleak.system.cleanup import cleanup

MiB = 2**20
REPORT = "import json; print('RESULT', json.dumps(result.to_dict()))"


def _result(out) -> dict:  # noqa: ANN001
    assert out.returncode == 0, out.stderr
    line = next(l for l in out.stdout.splitlines() if l.startswith("RESULT "))
    return json.loads(line[len("RESULT "):])


def _step(result: dict, name: str) -> dict:
    return next(s for s in result["steps"] if s["step"].startswith(name))


def test_deleted_tensor_kept_by_a_cycle_is_freed_by_gc(python) -> None:  # noqa: ANN001
    out = python(f"""
        import gc, torch
        from torchleak.system.cleanup import cleanup
        gc.disable()  # as during a long step: only an explicit collection frees cycles
        class Batch:
            def __init__(self):
                self.myself = self
                self.pixels = torch.ones(50_000_000)  # 200 MB
        batch = Batch()
        del batch
        result = cleanup()
        {REPORT}
    """)
    result = _result(out)
    gc_step = _step(result, "gc.collect")
    assert gc_step["status"] == "done"
    assert gc_step["freed_uss"] > 150 * MiB
    assert result["freed_uss"] > 150 * MiB and not result["freed_nothing"]
    assert "torchleak cleanup: gc.collect()" in out.stderr
    assert "freed 19" in out.stderr  # 19xMiB, in the gc line and the total
    assert "held by live objects" not in out.stderr and "in use by live" not in out.stderr


def test_heap_slack_after_deleting_tensors_is_freed_by_malloc_trim(python) -> None:  # noqa: ANN001
    # 120 KB tensors from the heap, each followed by a kept 1-element tensor: deleting
    # the large ones frees nothing to the system until the heap is trimmed.
    out = python(f"""
        import torch
        from torchleak.system.cleanup import cleanup
        kept, large = [], []
        for _ in range(2000):
            large.append(torch.ones(30_000)); kept.append(torch.ones(1))
        del large
        result = cleanup()
        {REPORT}
    """)
    result = _result(out)
    trim = _step(result, "malloc_trim")
    assert trim["status"] == "done"
    assert trim["freed_uss"] > 150 * MiB
    assert "malloc_trim(0)" in out.stderr and "total" in out.stderr


def test_memory_still_held_frees_nothing_and_says_who_can_tell(python) -> None:  # noqa: ANN001
    out = python(f"""
        import torch
        from torchleak.system.cleanup import cleanup
        history = [torch.ones(50_000_000)]
        result = cleanup(explain=lambda: "history (list, 1 item, 191 MiB) at train.py:3")
        {REPORT}
    """)
    result = _result(out)
    assert result["freed_nothing"]
    assert abs(result["freed_uss"]) < 8 * MiB
    lines = out.stderr.splitlines()
    held = next(l for l in lines if "freed almost nothing" in l)
    assert "in use by live objects" in held and "USS " in held
    assert lines[-1] == "torchleak cleanup: history (list, 1 item, 191 MiB) at train.py:3"
    assert result["explanation"] == "history (list, 1 item, 191 MiB) at train.py:3"


def test_without_a_recorder_the_user_is_pointed_at_the_holder_walk(python) -> None:  # noqa: ANN001
    out = python(f"""
        import numpy
        from torchleak.system.cleanup import cleanup
        held = numpy.ones(25_000_000)  # 200 MB, still referenced
        result = cleanup()
        {REPORT}
    """)
    result = _result(out)
    assert result["freed_nothing"] and result["explanation"] is None
    assert out.stderr.splitlines()[-1].endswith(
        "the holder walk names them (run the script under `torchleak run`)")


def test_cuda_step_runs_only_where_cuda_is_in_use(monkeypatch: pytest.MonkeyPatch) -> None:
    # No GPU on this machine: a stand-in for torch.cuda with a caching allocator that
    # holds 3 GiB until empty_cache().
    reserved = [3 * 2**30]
    calls: list[str] = []
    cuda = types.SimpleNamespace(
        is_initialized=lambda: True, device_count=lambda: 1,
        memory_reserved=lambda device: reserved[0],
        empty_cache=lambda: (calls.append("empty_cache"), reserved.__setitem__(0, 2**30)),
        ipc_collect=lambda: calls.append("ipc_collect"))
    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(cuda=cuda))
    result = cleanup(verbose=False)
    step = next(s for s in result.steps if s.name.startswith("torch.cuda"))
    assert calls == ["empty_cache", "ipc_collect"]
    assert step.status == "done" and step.freed_cuda == 2 * 2**30
    assert result.freed_cuda == 2 * 2**30 and not result.freed_nothing
    assert "2 GiB CUDA reserved" in str(result)  # the total may also count USS gc freed


def test_cuda_is_never_initialised_by_cleanup(python) -> None:  # noqa: ANN001
    out = python(f"""
        import torch
        from torchleak.system.cleanup import cleanup
        result = cleanup(verbose=False)
        print(torch.cuda.is_initialized())
        {REPORT}
    """)
    result = _result(out)
    assert out.stdout.startswith("False")
    step = _step(result, "torch.cuda")
    assert step["status"] == "skipped" and "not initialised" in step["detail"]


def test_a_failing_step_is_reported_and_the_others_run(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken() -> str:
        raise RuntimeError("allocator exploded")

    steps = tuple((name, broken if name.startswith("gc") else action, skip)
                  for name, action, skip in cleanup_module._STEPS)
    monkeypatch.setattr(cleanup_module, "_STEPS", steps)
    result = cleanup(verbose=False,
                     explain=lambda: (_ for _ in ()).throw(ValueError("walk failed")))
    gc_step = result.steps[0]
    assert gc_step.status == "failed" and "allocator exploded" in gc_step.detail
    assert [s.status for s in result.steps[1:]] != ["failed", "failed"]
    assert "gc.collect()" in str(result) and "failed: RuntimeError" in str(result)
    if result.freed_nothing:
        assert "could not name the holders: ValueError: walk failed" in str(result)
