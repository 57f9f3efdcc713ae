"""The CUDA path of the recorder. This machine has no GPU, so the allocator is faked
(torch.cuda's query functions only); the real test beside it runs the same code path on
CPU, where CUDA must stay untouched and `allocated` falls back to USS."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
import torch
import torch.cuda.memory as cuda_memory

from torchleak.live.engine import Monitor, MonitorOptions
from torchleak.record.probes import cuda as cuda_probe

MB = 1024 * 1024
# Faking torch.cuda's answers on a machine with a real GPU breaks torch itself (its seeding
# asks the real device list); there tests/cuda runs the same path for real.
faked_gpu = pytest.mark.skipif(torch.cuda.is_available(), reason="a real GPU is here: "
                               "tests/cuda runs this path on it")


def _train(steps: int) -> None:
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 8)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(steps):
        loss = model(torch.randn(4, 8)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()


def _record(tmp_path: Path, steps: int) -> sqlite3.Connection:
    """The engine every entry point uses, on a real CPU loop (the allocator maybe faked)."""
    monitor = Monitor(MonitorOptions(out=tmp_path, name="cuda-test", quiet=True))
    monitor.start()
    try:
        _train(steps)
    finally:
        monitor.stop("finished", 0, analyse=False)
    return sqlite3.connect(tmp_path / "trace.sqlite")


def _fake_cuda(monkeypatch: pytest.MonkeyPatch, fake: FakeAllocator) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "memory_reserved", lambda device=None: 512 * MB)
    monkeypatch.setattr(torch.cuda, "memory_stats_as_nested_dict", fake.memory_stats)
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device: (70_000 * MB, 80_000 * MB))

    class Props:
        name = "Fake H100"
        total_memory = 80_000 * MB

    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda device: Props())
    # A CUDA finding called live records the allocator's history: never the real
    # (CUDA-less) functions under a faked device.
    monkeypatch.setattr(cuda_memory, "_record_memory_history", lambda *a, **k: None)
    monkeypatch.setattr(cuda_memory, "_dump_snapshot", lambda filename: None)


class FakeAllocator:
    """Answers torch.cuda's allocator queries like one device whose memory grows 1 MiB a call."""

    def __init__(self) -> None:
        self.calls = 0

    def memory_stats(self, device: int) -> dict[str, object]:
        """``memory_stats_as_nested_dict``'s shape: counter, pool, then current or peak."""
        self.calls += 1
        allocated = 100 * MB + self.calls * MB
        return {
            "allocated_bytes": {"all": {"current": allocated, "peak": allocated}},
            "reserved_bytes": {"all": {"current": 512 * MB, "peak": 512 * MB}},
            "active_bytes": {"all": {"current": allocated}},
            "inactive_split_bytes": {"all": {"current": 3 * MB}},
            "num_alloc_retries": 0,
            "num_ooms": 0,
        }


def test_without_a_gpu_cuda_is_never_touched_and_allocated_is_uss(tmp_path: Path) -> None:
    conn = _record(tmp_path, 30)
    assert conn.execute("SELECT COUNT(*) FROM cuda_samples").fetchone()[0] == 0
    rows = conn.execute("SELECT allocated, uss FROM torch_trace").fetchall()
    assert len(rows) == 30
    assert all(a == pytest.approx(u) and a > 10 for a, u in rows)
    assert not torch.cuda.is_initialized()


@faked_gpu
def test_cuda_columns_fill_from_the_allocator(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeAllocator()
    _fake_cuda(monkeypatch, fake)
    conn = _record(tmp_path, 30)
    rows = conn.execute("SELECT step, allocated, reserved, inactive_split, total FROM cuda_samples "
                        "ORDER BY step").fetchall()
    assert [r[0] for r in rows] == list(range(1, 31))
    assert [r[1] for r in rows] == [100 * MB + (i + 1) * MB for i in range(30)]
    assert {r[2] for r in rows} == {512 * MB} and {r[3] for r in rows} == {3 * MB}
    assert {r[4] for r in rows} == {80_000 * MB}
    view = conn.execute("SELECT step, allocated, reserved FROM torch_trace ORDER BY step").fetchall()
    assert view[0][1] == pytest.approx(101.0) and view[-1][1] == pytest.approx(130.0)
    assert {v[2] for v in view} == {512.0}


def test_device_names_read_only_used_devices(monkeypatch: pytest.MonkeyPatch) -> None:
    class Props:
        name = "Fake H100"
        total_memory = 80 * 1024 * MB

    asked: list[int] = []
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 1)
    monkeypatch.setattr(torch.cuda, "memory_reserved", lambda device=None: 0)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda d: asked.append(d) or Props())
    assert cuda_probe.device_names() == [{"device": 1, "name": "Fake H100",
                                          "total": 80 * 1024 * MB}]
    assert asked == [1]  # the device the program uses, never device 0 it does not


def test_nothing_is_read_before_the_program_initialises_cuda(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: False)
    monkeypatch.setattr(torch.cuda, "memory_stats", lambda d: pytest.fail("read CUDA early"))
    monkeypatch.setattr(torch.cuda, "memory_stats_as_nested_dict",
                        lambda d: pytest.fail("read CUDA early"))
    assert cuda_probe.CudaProbe().sample(1) == [] and cuda_probe.device_names() == []


@faked_gpu
def test_growing_cuda_allocation_is_judged_against_the_gpu_total(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from torchleak.analysis import analyze

    fake = FakeAllocator()
    _fake_cuda(monkeypatch, fake)
    _record(tmp_path, 120).close()
    monkeypatch.undo()
    report = analyze(tmp_path / "trace.sqlite")
    cuda = [f for f in report.findings if f.signal == "cuda_allocated"]
    assert report.verdict == "leak" and cuda, report.to_json()
    assert cuda[0].bytes_per_step == pytest.approx(MB, rel=0.05)
    assert cuda[0].oom is not None and cuda[0].oom.limit_name == "cuda:0 total"
    assert cuda[0].oom.steps_to_oom == pytest.approx((80_000 - 220) * MB / MB, rel=0.05)


class FakeHistory:
    """torch.cuda.memory's history functions: what was asked, and a pickle like PyTorch's."""

    def __init__(self) -> None:
        self.calls: list[object] = []

    def _record_memory_history(self, enabled: object = "all", **kwargs: object) -> None:
        self.calls.append(("record", enabled, kwargs.get("max_entries")))

    def _dump_snapshot(self, filename: str) -> None:
        import pickle

        self.calls.append(("dump", filename))
        with open(filename, "wb") as handle:
            pickle.dump({"segments": [], "device_traces": [[]]}, handle)


@faked_gpu
def test_a_cuda_finding_records_the_allocator_history_into_the_run_folder(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import pickle

    import torch.cuda.memory

    fake, history = FakeAllocator(), FakeHistory()
    _fake_cuda(monkeypatch, fake)
    monkeypatch.setattr(torch.cuda.memory, "_record_memory_history", history._record_memory_history)
    monkeypatch.setattr(torch.cuda.memory, "_dump_snapshot", history._dump_snapshot)
    monitor = Monitor(MonitorOptions(out=tmp_path, name="cuda-history", quiet=True))
    monitor.start()
    try:
        # 1 MiB more allocated every step: the live detector calls it after a few hundred
        # steps, whenever its thread gets to look (the loop runs until it has, or 20,000).
        for _ in range(200):
            _train(100)
            if any(c[0] == "record" for c in history.calls):
                break
    finally:
        monitor.stop("finished", 0, analyse=False)
    starts = [c for c in history.calls if c[0] == "record" and c[1] == "all"]
    assert starts and starts[0][2] is not None  # bounded: never an unlimited history
    snapshot = tmp_path / "cuda_snapshot.pickle"
    assert ("dump", str(snapshot)) in history.calls and ("record", None, None) in history.calls
    assert pickle.loads(snapshot.read_bytes())["segments"] == []
    conn = sqlite3.connect(tmp_path / "trace.sqlite")
    value = conn.execute("SELECT value FROM meta WHERE key = 'cuda_snapshot'").fetchone()
    assert value is not None and "cuda_snapshot.pickle" in value[0]
