"""Reading DataLoader settings and Dataset storage from source, without running it."""

from __future__ import annotations

from torchleak.system.doctor_checks import check_cgroup, check_gpus
from torchleak.system.doctor_model import Machine
from torchleak.system.doctor_script import script_checks
from torchleak.system.gpu import GpuInventory, parse_nvidia_smi
from torchleak.system.limits import CgroupMemory, MachineMemory
from torchleak.system.script_scan import scan_script


def test_values_are_resolved_from_names_argparse_and_arithmetic() -> None:
    facts = scan_script('''
import argparse, os
from torch.utils import data
WORKERS = 2 * 3
parser = argparse.ArgumentParser()
parser.add_argument("--batch-size", type=int, default=256)
parser.add_argument("-p", "--prefetch", dest="prefetch_depth", default=3)
args = parser.parse_args()
a = data.DataLoader(ds, args.batch_size, True, None, None, min(WORKERS, 4),
                    prefetch_factor=args.prefetch_depth)
b = data.DataLoader(ds, batch_size=cfg["bs"], num_workers=min(os.cpu_count(), 4))
''', "train.py")
    first, second = facts.loaders
    assert (first.value("batch_size"), first.value("num_workers"),
            first.value("prefetch_factor"), first.value("persistent_workers")) == (256, 4, 3,
                                                                                  False)
    assert second.value("batch_size") is None and second.value("num_workers") is None
    assert second.settings["num_workers"].text == "min(os.cpu_count(), 4)"
    assert second.value("pin_memory") is False  # not passed: DataLoader's default


def test_python_object_stores_are_found_with_their_size() -> None:
    facts = scan_script('''
import json, numpy as np
from torch.utils.data import Dataset
N = 1000
class Records(Dataset):
    def __init__(self, path):
        self.rows = [{"path": f"{i}.jpg", "label": i % 7} for i in range(N * 50)]
        self.index = {i: (i, i + 1) for i in range(10)}
        self.meta = json.load(open(path))
        self.pixels = np.zeros((N, 3, 32, 32))
        self.pairs = [(i, i * 2) for i in range(N)]
class Helper:
    def __init__(self):
        self.cache = [{"a": 1} for _ in range(10**6)]
''', "data.py")
    stores = {s.attr: s for s in facts.stores}
    assert set(stores) == {"rows", "index", "meta", "pairs"}  # not numpy, not non-datasets
    rows = stores["rows"]
    assert (rows.class_name, rows.line, rows.kind, rows.items) == ("Records", 7,
                                                                   "list of dicts", 50000)
    assert rows.fields == ("path", "label")
    assert 10e6 < rows.estimated_bytes < 30e6  # 50,000 small dicts: ~240 B each really
    assert stores["meta"].kind == "loaded from a file" and stores["meta"].items is None
    assert stores["pairs"].kind == "list of tuples"


def test_loader_of_a_wrapped_dataset_is_matched_to_the_scripts_stores() -> None:
    facts = scan_script('''
from torch.utils.data import DataLoader, Dataset, Subset
class Big(Dataset):
    def __init__(self):
        self.items = [{"x": i} for i in range(500_000)]
train = Subset(Big(), range(1000))
loader = DataLoader(train, num_workers=4)
''', "t.py")
    machine = Machine(MachineMemory(2**34, 2**33, 0, 0), None, GpuInventory(), {})
    checks, proposals = script_checks(facts, machine)
    assert any(p.change.startswith("self.items = ") and "4 workers" in p.saving
               for p in proposals)


NVIDIA_SMI = """0, NVIDIA H100 80GB HBM3, 81559, 1024, 80535, 550.54.15
1, NVIDIA H100 80GB HBM3, 81559, 80000, 1559, 550.54.15
2, GRID T4-8Q, [N/A], [N/A], [N/A], 550.54.15
"""


def test_nvidia_smi_rows_and_a_nearly_full_gpu() -> None:
    # No GPU on this machine: the text nvidia-smi prints for two H100s and a vGPU.
    gpus = parse_nvidia_smi(NVIDIA_SMI)
    assert [(g.index, g.total, g.free) for g in gpus] == [
        (0, 81559 * 2**20, 80535 * 2**20), (1, 81559 * 2**20, 1559 * 2**20)]
    machine = Machine(MachineMemory(None, None, None, None), None,
                      GpuInventory(gpus, "nvidia-smi"), {})
    check = check_gpus(machine)
    assert check.status == "warn" and "nearly full" in check.why
    assert check.value.startswith("0: NVIDIA H100 80GB HBM3, 79.6 GiB total, 78.6 GiB free")


def test_gpu_machine_gets_the_mixed_precision_proposal() -> None:
    facts = scan_script("from torch.utils.data import DataLoader\n"
                        "loader = DataLoader(ds, batch_size=64)\n", "t.py")
    small_gpu = parse_nvidia_smi("0, Tesla T4, 15360, 100, 15260, 535.1\n")
    machine = Machine(MachineMemory(2**34, 2**33, 0, 0), None,
                      GpuInventory(small_gpu, "nvidia-smi"), {})
    _, proposals = script_checks(facts, machine)
    changes = [p.change for p in proposals]
    assert any("torch.autocast" in c for c in changes)
    assert any(c.startswith("batch_size=16 with 4 accumulation steps") for c in changes)
    facts.uses_mixed_precision = True
    assert not any("autocast" in p.change for p in script_checks(facts, machine)[1])


def test_cgroup_near_its_limit_fails() -> None:
    group = CgroupMemory(2, "/sys/fs/cgroup/job", 8 * 2**30, "/sys/fs/cgroup/job", None,
                         None, None, int(7.5 * 2**30))
    machine = Machine(MachineMemory(2**36, 2**35, 0, 0), group, GpuInventory(), {})
    check = check_cgroup(machine)
    assert check.status == "fail"
    assert check.value == "8 GiB (memory.max, cgroup v2), 7.5 GiB in use"
