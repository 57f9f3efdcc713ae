"""The CUDA path of the recorder. This machine has no GPU, so the allocator is faked
(torch.cuda's query functions only); the real test beside it runs the same code path on
CPU, where CUDA must stay untouched and `allocated` falls back to USS."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import torch
import torch.cuda.memory as cuda_memory
from torch.optim.optimizer import register_optimizer_step_post_hook

from torchleak.live.engine import Monitor, MonitorOptions
from torchleak.record import cuda_watch
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
    """Answers torch.cuda's allocator queries like one device whose memory grows 1 MiB a
    training step (counted by an optimizer hook of its own, which runs before torchleak's)."""

    def __init__(self) -> None:
        self.steps = 0
        self.reads = 0  # counter reads, each one call of memory_stats_as_nested_dict
        self._hook = register_optimizer_step_post_hook(self._count)

    def _count(self, optimizer: object, args: object, kwargs: object) -> None:
        self.steps += 1

    def remove(self) -> None:
        self._hook.remove()

    def memory_stats(self, device: int) -> dict[str, object]:
        """``memory_stats_as_nested_dict``'s shape: counter, pool, then current or peak."""
        self.reads += 1
        allocated = 100 * MB + self.steps * MB
        return {
            "allocated_bytes": {"all": {"current": allocated, "peak": allocated}},
            "reserved_bytes": {"all": {"current": 512 * MB, "peak": 512 * MB}},
            "active_bytes": {"all": {"current": allocated}},
            "inactive_split_bytes": {"all": {"current": 3 * MB + self.steps}},
            "num_alloc_retries": 0,
            "num_ooms": 0,
        }


@pytest.fixture
def fake() -> Iterator[FakeAllocator]:
    allocator = FakeAllocator()
    yield allocator
    allocator.remove()


def test_without_a_gpu_cuda_is_never_touched_and_allocated_is_uss(tmp_path: Path) -> None:
    conn = _record(tmp_path, 30)
    assert conn.execute("SELECT COUNT(*) FROM cuda_samples").fetchone()[0] == 0
    rows = conn.execute("SELECT allocated, uss FROM torch_trace").fetchall()
    assert len(rows) == 30
    assert all(a == pytest.approx(u) and a > 10 for a, u in rows)
    assert not torch.cuda.is_initialized()


@faked_gpu
def test_cuda_columns_fill_from_the_allocator(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                              fake: FakeAllocator) -> None:
    _fake_cuda(monkeypatch, fake)
    conn = _record(tmp_path, 300)
    rows = conn.execute("SELECT step, allocated, reserved, inactive_split, total FROM cuda_samples "
                        "ORDER BY step").fetchall()
    # A fast loop is read every few steps, each row with that step's exact counters.
    steps = [r[0] for r in rows]
    assert steps[0] == 1 and len(steps) >= 3 and steps == sorted(set(steps))
    assert [r[1] for r in rows] == [100 * MB + step * MB for step in steps]
    # Every counter is that sample's own (fragmentation moves here every step) ...
    assert {r[2] for r in rows} == {512 * MB}
    assert [r[3] for r in rows] == [3 * MB + step for step in steps]
    # ... the driver's total only where it was asked (the first sample, then once a second).
    assert rows[0][4] == 80_000 * MB and {r[4] for r in rows} <= {80_000 * MB, None}
    # One read of the counters a sample (the device list made from it at full samples),
    # and one for the device names in the run's metadata.
    assert fake.reads == len(rows) + 1
    # The view gives every step the latest reading at or before it, never USS between.
    view = conn.execute("SELECT step, allocated, reserved FROM torch_trace ORDER BY step").fetchall()
    assert len(view) == 300
    latest = {step: max(s for s in steps if s <= step) for step, _, _ in view}
    assert [v[1] for v in view] == [pytest.approx(100 + latest[v[0]]) for v in view]
    assert {v[2] for v in view} == {512.0}


def test_device_names_read_only_used_devices(monkeypatch: pytest.MonkeyPatch) -> None:
    class Props:
        name = "Fake H100"
        total_memory = 80 * 1024 * MB

    asked: list[int] = []
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 1)
    monkeypatch.setattr(torch.cuda, "memory_stats_as_nested_dict",
                        lambda device: {"reserved_bytes": {"all": {"current": 0}}})
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
    assert cuda_probe.CudaProbe().sample(1, 0.0) == [] and cuda_probe.device_names() == []


@faked_gpu
def test_growing_cuda_allocation_is_judged_against_the_gpu_total(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake: FakeAllocator) -> None:
    from torchleak.analysis import analyze

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
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake: FakeAllocator) -> None:
    import pickle

    import torch.cuda.memory

    history = FakeHistory()
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


class WatchHost:
    """What the CUDA watch needs of the recorder: its rows kept, faults raised."""

    def __init__(self) -> None:
        self.step = 0
        self.rows: list[tuple[object, ...]] = []

    def allowed(self, probe: str) -> bool:
        return True

    def safely(self, probe: str, action: Callable[[], None]) -> None:
        action()

    def set_meta(self, key: str, value: object) -> None:
        pass

    def event(self, kind: str, source: str, message: str) -> None:
        pass

    def add_rows(self, table: str, rows: list[tuple[object, ...]]) -> None:
        self.rows.extend(rows)


def _read_steps(tmp_path: Path, step_seconds: float, read_seconds: float,
                monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The steps a loop of ``step_seconds`` steps reads at, when a read takes
    ``read_seconds`` (a clock the test moves: the rule, not this machine's speed)."""
    host, now = WatchHost(), [0.0]
    watch = cuda_watch.CudaWatch(host, tmp_path)
    monkeypatch.setattr(cuda_watch, "perf_counter", lambda: now[0] + read_seconds)
    for step in range(1, 2001):
        now[0] = step * step_seconds
        if step >= watch.next_step and now[0] >= watch.next_time:  # the recorder's gate
            watch.at_boundary(step, now[0])
    return [row[0] for row in host.rows]


@faked_gpu
def test_a_read_is_followed_by_200_times_its_own_time_without_one(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake: FakeAllocator) -> None:
    _fake_cuda(monkeypatch, fake)
    # 1 ms steps, 50 us reads: one read every 10 ms (the 11th step), from the first.
    fast = _read_steps(tmp_path, 0.001, 50e-6, monkeypatch)
    assert fast[0] == 1 and {b - a for a, b in zip(fast, fast[1:])} == {11}
    # Steps slower than 200 reads: every step is read.
    assert _read_steps(tmp_path, 0.02, 50e-6, monkeypatch) == list(range(1, 2001))
    # A read slowed to 1 ms: still one at least every 50 ms.
    slow = _read_steps(tmp_path, 0.001, 0.001, monkeypatch)
    assert {b - a for a, b in zip(slow, slow[1:])} <= {50, 51}  # 50 ms, in floats
