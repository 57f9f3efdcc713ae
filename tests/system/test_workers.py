"""DataLoader caps: what the machine holds, and the patch that applies them and goes away."""

from __future__ import annotations

import pytest

from torchleak.system.safe import plan_safe
from torchleak.system.workers import cap_dataloaders, cpu_count, worker_cap

pytestmark = pytest.mark.filterwarnings("ignore:This DataLoader will create")
torch = pytest.importorskip("torch")
from torch.utils.data import DataLoader, TensorDataset  # noqa: E402


@pytest.fixture
def dataset() -> TensorDataset:
    return TensorDataset(torch.arange(64.0))


def test_caps_apply_inside_and_are_recorded(dataset: TensorDataset) -> None:
    original = DataLoader.__init__
    with cap_dataloaders(2, persistent_off=True) as caps:
        big = DataLoader(dataset, 8, num_workers=8, persistent_workers=True,
                         prefetch_factor=4)
        small = DataLoader(dataset, batch_size=8, num_workers=1)
        none = DataLoader(dataset, batch_size=8)
        again = DataLoader(dataset, 8, True, num_workers=8, persistent_workers=True)
    assert DataLoader.__init__ is original
    assert (big.num_workers, big.persistent_workers, big.prefetch_factor) == (2, False, 4)
    assert (small.num_workers, none.num_workers) == (1, 0)
    assert again.num_workers == 2
    assert [c.to_dict() for c in caps.changes] == [
        {"setting": "DataLoader.num_workers", "value": "2", "was": "8"},
        {"setting": "DataLoader.persistent_workers", "value": "False", "was": "True"},
    ]
    after = DataLoader(dataset, 8, num_workers=8, persistent_workers=True)
    assert (after.num_workers, after.persistent_workers) == (8, True)


def test_capped_loader_still_iterates_the_same_batches(dataset: TensorDataset) -> None:
    plain = [b[0].tolist() for b in DataLoader(dataset, batch_size=16, num_workers=3)]
    with cap_dataloaders(1):
        capped_loader = DataLoader(dataset, batch_size=16, num_workers=3)
        capped = [b[0].tolist() for b in capped_loader]
    assert capped_loader.num_workers == 1
    assert capped == plain


def test_restored_even_when_the_block_raises(dataset: TensorDataset) -> None:
    original = DataLoader.__init__
    with pytest.raises(KeyError), cap_dataloaders(1):
        raise KeyError("script failed")
    assert DataLoader.__init__ is original


def test_machine_cap_is_bounded_by_cpus_and_says_why() -> None:
    cap, reason = worker_cap(per_worker=1 << 30)
    assert 1 <= cap <= cpu_count()
    assert f"{cpu_count()} CPUs" in reason and "/dev/shm" in reason and "workers of 1 GiB" in reason
    tiny_memory_cap, _ = worker_cap(per_worker=1 << 50)
    assert tiny_memory_cap == 1  # never 0: that would change how the loader works


def test_workers_mode_plans_the_caps() -> None:
    plan = {c.setting: c for c in plan_safe("workers", environ={})}
    assert plan["DataLoader.num_workers"].value.startswith("<= ")
    assert plan["DataLoader.persistent_workers"].value == "False"
