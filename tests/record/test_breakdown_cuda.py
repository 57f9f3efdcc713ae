"""The CUDA split at a census. This machine has no GPU: torch.cuda's query functions are
faked (one device, 512 MiB reserved, 10,000 MiB in use by the driver's count)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
import torch

from torchleak.live.engine import Monitor, MonitorOptions

MB = 1024 * 1024


def _fake_cuda(monkeypatch: pytest.MonkeyPatch) -> None:
    stats = {"allocated_bytes": {"all": {"current": 200 * MB}},
             "reserved_bytes": {"all": {"current": 512 * MB}}}
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "memory_reserved", lambda device=None: 512 * MB)
    monkeypatch.setattr(torch.cuda, "memory_stats_as_nested_dict", lambda device: dict(stats))
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device: (70_000 * MB, 80_000 * MB))


def test_device_memory_splits_into_cache_other_and_tensors(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_cuda(monkeypatch)
    monitor = Monitor(MonitorOptions(out=tmp_path, name="cuda-split", quiet=True))
    monitor.start()
    try:
        model = torch.nn.Linear(8, 8)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for step in range(5):
            loss = model(torch.randn(4, 8)).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            if step == 2:  # a census now, as `torchleak attach --snapshot` asks for one
                recorder = monitor.recorder
                assert recorder is not None
                recorder.request(lambda frame: recorder.snapshot(frame, "attach"))
    finally:
        monitor.stop("finished", 0, analyse=False)
    conn = sqlite3.connect(tmp_path / "trace.sqlite")
    split = dict(conn.execute("SELECT category, bytes FROM breakdown WHERE step = "
                              "(SELECT MIN(step) FROM breakdown)"))
    assert split["cuda_total"] == 10_000 * MB
    assert split["cuda_cache"] == 312 * MB and split["cuda_other"] == (10_000 - 512) * MB
    # No tensor lives on the (fake) device: all it allocated is "other tensors".
    assert split["cuda_other_tensors"] == 200 * MB
    device = sum(v for k, v in split.items() if k.startswith("cuda_") and k != "cuda_total")
    assert device == split["cuda_total"]
    host = sum(v for k, v in split.items() if not k.startswith("cuda_") and k != "total")
    assert host == split["total"] and split["parameters"] == (8 * 8 + 8) * 4
