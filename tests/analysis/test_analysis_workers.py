"""DataLoader workers that copy a Dataset's Python objects on read (patterns 7 and 8).

The growth is in the forked workers, not in the main process, so only the recorder's
per-worker USS sees it. A real ``torchleak run`` in a subprocess: slow and memory-heavy.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
from harness import run_cli

pytestmark = pytest.mark.slow

ITEMS = 1_500_000

SCRIPT = f"""
    import random

    import torch
    import torch.nn.functional as F
    from torch.utils.data import DataLoader, Dataset


    class TupleDataset(Dataset):
        def __init__(self, n):
            # A big list of Python tuples: every read writes its refcounts, so the forked
            # workers' copy-on-write pages are copied a few at a time.
            self.records = [(i, float(i), str(i % 97)) for i in range(n)]

        def __len__(self):
            return 10**9  # random indices, never a full epoch

        def __getitem__(self, index):
            i, value, _ = self.records[random.randrange(len(self.records))]
            return torch.tensor([value, i % 7], dtype=torch.float32), i % 2


    def main():
        torch.manual_seed(0)
        torch.set_num_threads(1)
        loader = DataLoader(TupleDataset({ITEMS}), batch_size=256, num_workers=2,
                            persistent_workers=True, worker_init_fn=lambda w: random.seed(w),
                            sampler=range(10**9))
        model = torch.nn.Linear(2, 2)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
        for step, (x, y) in enumerate(loader):
            loss = F.cross_entropy(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            if step == 299:
                break


    main()
"""


def test_worker_copy_on_read_is_named(tmp_path: Path) -> None:
    proc, report = run_cli(tmp_path, SCRIPT, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert report is not None, proc.stderr
    assert report["verdict"] == "leak", report
    found = [f for f in report["findings"] if f["kind"] == "worker_memory"]
    assert found, report
    finding = found[0]
    assert finding["severity"] in ("high", "medium")
    assert "DataLoader" in finding["culprit"] or "workers" in finding["culprit"]
    assert "TupleDataset.records" in finding["culprit"], finding  # the likely cause
    assert "persistent_workers" in finding["culprit"], finding
    assert finding["signal"] == "workers_uss"
    # A batch reads 256 random tuples: about one 4 KiB page copied per read while most of
    # the list is still shared, i.e. ~1 MiB a step, fewer as pages are already copied.
    assert 256 * 1024 <= finding["bytes_per_step"] <= 2 * 1024 * 1024, finding
    # Worker USS is sampled about every 0.5 s (~40 steps here): detection needs 6 samples.
    assert finding["detected_at_step"] is not None and finding["detected_at_step"] <= 300


# The training loop both scripts below share: LOADER and EPOCHS are filled in.
LOOP = """

    def main():
        torch.manual_seed(0)
        torch.set_num_threads(1)
        loader = DataLoader(LOADER)
        model = torch.nn.Linear(8, 2)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
        for epoch in range(EPOCHS):
            for x, y in loader:
                loss = F.cross_entropy(model(x), y)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()


    if __name__ == "__main__":
        main()
"""


def _script(dataset: str, loader: str, epochs: int) -> str:
    return dataset + LOOP.replace("LOADER", loader).replace("EPOCHS", str(epochs))


def _worker_leak(folder: Path, script: str) -> dict[str, Any]:
    """Record ``script``: it must be a leak with a worker_memory finding, returned."""
    proc, report = run_cli(folder, script, timeout=120)
    assert proc.returncode == 0, proc.stderr
    found = [f for f in (report or {}).get("findings", []) if f["kind"] == "worker_memory"]
    assert report is not None and report["verdict"] == "leak" and found, (
        proc.stderr, report, _workers_seen(folder / "run" / "trace.sqlite"))
    return found[0]


def _workers_seen(trace: Path) -> str:
    """What the trace holds of the workers, for a failure to explain itself: each sweep's
    (step, workers read, summed USS in MiB), the loaders' holder details, the events."""
    conn = sqlite3.connect(f"file:{trace}?mode=ro", uri=True)
    try:
        sweeps = conn.execute("SELECT step, COUNT(*), SUM(uss) >> 20 FROM process_samples "
                              "WHERE role = 'worker' GROUP BY t ORDER BY t").fetchall()
        loaders = conn.execute("SELECT DISTINCT holder, detail FROM holders "
                               "WHERE kind = 'dataloader'").fetchall()
        events = conn.execute("SELECT step, kind, source, message FROM events").fetchall()
    finally:
        conn.close()
    return f"sweeps {sweeps}\nloaders {loaders}\nevents {events}"


CACHING = _script("""
    import torch
    import torch.nn.functional as F
    from torch.utils.data import DataLoader, Dataset


    class CachingDataset(Dataset):
        def __init__(self):
            self.cache = []  # empty here: each worker fills its own copy

        def __len__(self):
            return 600 * 16

        def __getitem__(self, index):
            self.cache.append(torch.randn(1024))  # 4 KiB an item, kept by the worker
            return torch.randn(8), index % 2
""", "CachingDataset(), batch_size=16, num_workers=2", 1)


def test_a_cache_each_worker_fills_is_named_with_its_own_advice(tmp_path: Path) -> None:
    finding = _worker_leak(tmp_path, CACHING)
    assert "CachingDataset.cache" in finding["culprit"], finding
    assert "persistent_workers" not in finding["culprit"] + finding["fix"], finding
    assert finding["pattern"] == "unbounded-cache" and "`cache`" in finding["fix"], finding
    # 16 items of 4 KiB a step, shared between two workers.
    assert 32 * 1024 <= finding["bytes_per_step"] <= 128 * 1024, finding


# Every page is copied in the first epoch: then the workers' memory is flat.
LEVELS_OFF = _script("""
    import torch
    import torch.nn.functional as F
    from torch.utils.data import DataLoader, Dataset


    class TokenDataset(Dataset):
        def __init__(self, n):
            self.samples = [(i * 7919 % 100_003, float(i)) for i in range(n)]

        def __len__(self):
            return len(self.samples)

        def __getitem__(self, index):
            token, weight = self.samples[index]
            return torch.full((8,), weight / 1e6), token % 2
""", "TokenDataset(300_000), batch_size=1024, shuffle=True, num_workers=2, "
    "persistent_workers=True", 3)


def test_workers_that_copied_the_dataset_and_levelled_off_are_named(tmp_path: Path) -> None:
    finding = _worker_leak(tmp_path, LEVELS_OFF)
    assert "TokenDataset.samples" in finding["culprit"], finding
    assert finding["pattern"] == "worker-copy-on-read", finding
