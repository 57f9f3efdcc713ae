"""``torchleak doctor`` on this machine and on training scripts, end to end."""

from __future__ import annotations

import json
import os
import re
import resource
import subprocess
import sys
from pathlib import Path

import pytest

COW_SCRIPT = '''
import torch
from torch.utils.data import DataLoader, Dataset

N_ITEMS = 200_000


class ItemsDataset(Dataset):
    def __init__(self):
        self.items = [{"id": i, "label": i % 10, "weight": 1.0} for i in range(N_ITEMS)]

    def __len__(self):
        return len(self.items)

    def __getitem__(self, index):
        item = self.items[index]
        return torch.tensor([item["weight"]]), item["label"]


loader = DataLoader(ItemsDataset(), batch_size=64, shuffle=True, num_workers=2,
                    persistent_workers=True)
model = torch.nn.Linear(1, 10)
losses = []
for epoch in range(3):
    for x, y in loader:
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        losses.append(loss)
'''

HEALTHY_SCRIPT = '''
import torch
from torch.utils.data import DataLoader, TensorDataset

data = TensorDataset(torch.randn(512, 8), torch.randn(512, 1))
loader = DataLoader(data, batch_size=32, num_workers=1)
model = torch.nn.Linear(8, 1)
for x, y in loader:
    torch.nn.functional.mse_loss(model(x), y).backward()
'''


def doctor(*args: str, cwd: Path | None = None,
           preexec: object = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "torchleak", "doctor", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=120,
                          preexec_fn=preexec)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def machine_json() -> dict:
    out = doctor("--json")
    report = json.loads(out.stdout)
    assert out.returncode == report["exit_code"]
    return report


def test_doctor_prints_ram_cgroup_shm_and_malloc(machine_json: dict) -> None:
    out = doctor()
    assert out.returncode == machine_json["exit_code"], out.stderr
    lines = out.stdout.splitlines()
    ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    for name in ("RAM", "swap", "cgroup limit", "/dev/shm", "open files (ulimit -n)",
                 "processes (ulimit -u)", "malloc", "GPU", "PYTORCH_CUDA_ALLOC_CONF",
                 "torch"):
        assert any(line[6:].startswith(f"{name}: ") for line in lines), name
    ram_line = next(line for line in lines if line[6:].startswith("RAM: "))
    assert f"{ram / 2**30:.3g} GiB total" in ram_line
    malloc_line = next(line for line in lines if line[6:].startswith("malloc: "))
    if hasattr(os, "confstr") and os.confstr("CS_GNU_LIBC_VERSION"):
        assert os.confstr("CS_GNU_LIBC_VERSION") in malloc_line  # "glibc 2.36"
    assert lines[0].startswith("torchleak doctor: ")
    assert "…" not in out.stdout


def test_json_has_every_check_with_why(machine_json: dict) -> None:
    names = [c["name"] for c in machine_json["checks"]]
    assert names[:4] == ["RAM", "swap", "cgroup limit", "/dev/shm"]
    for check in machine_json["checks"]:
        assert check["status"] in ("ok", "warn", "fail") and check["value"] and check["why"]
    summary = machine_json["summary"]
    assert sum(summary.values()) == len(names)
    ram = next(c for c in machine_json["checks"] if c["name"] == "RAM")
    assert ram["data"]["total"] == os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


@pytest.fixture(scope="module")
def cow_script(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("doctor") / "train.py"
    path.write_text(COW_SCRIPT)
    return path


def test_script_with_persistent_workers_and_list_of_dicts(cow_script: Path) -> None:
    out = doctor(cow_script.name, cwd=cow_script.parent)
    assert out.returncode == 0, out.stderr  # warnings only
    text = out.stdout
    assert "warn  Dataset storage (train.py:10): ItemsDataset.items (list of dicts, " \
           "200,000 items" in text
    assert "warn  DataLoader of ItemsDataset (train.py:20): batch_size=64, " \
           "num_workers=2, persistent_workers=True" in text
    proposals = text[text.index("Proposed changes"):]
    blocks = re.split(r"\n  (?=\d+\. )", proposals)[1:]  # one per numbered proposal
    persistent = next(b for b in blocks if "persistent_workers=False" in b)
    assert persistent.split()[1] == "train.py:20"
    assert "never restart" in persistent and "saves: up to ~" in persistent
    storage = next(b for b in blocks if "np.asarray" in b)
    assert "train.py:10" in storage and "copy-on-read" in storage
    assert "('id', 'label', 'weight')" in storage
    assert "saves: ~" in storage and "2 workers x ~" in storage
    assert "TL102" in text  # the static check: losses.append(loss)
    assert doctor(cow_script.name, "--strict", cwd=cow_script.parent).returncode == 1


def test_script_json_lists_the_worker_changes(cow_script: Path) -> None:
    out = doctor(str(cow_script), "--json")
    report = json.loads(out.stdout)
    changes = {p["change"]: p for p in report["proposals"]}
    assert "persistent_workers=False" in changes
    assert all(p["reason"] and p["saving"] for p in report["proposals"])
    loader = report["script"]["loaders"][0]
    assert loader["settings"]["persistent_workers"] is True
    assert loader["settings"]["num_workers"] == 2
    store = report["script"]["stores"][0]
    assert (store["attr"], store["kind"], store["items"]) == ("items", "list of dicts", 200000)
    # the graph kept (TL102) and the list that grows for the whole run (TL107)
    assert [d["code"] for d in report["diagnostics"]] == ["TL102", "TL107"]


def test_healthy_script_has_no_worker_changes(tmp_path: Path) -> None:
    path = tmp_path / "healthy.py"
    path.write_text(HEALTHY_SCRIPT)
    report = json.loads(doctor(str(path), "--json").stdout)
    loader_checks = [c for c in report["checks"] if c["name"].startswith("DataLoader")]
    assert [c["status"] for c in loader_checks] == ["ok"]
    assert not [p for p in report["proposals"] if p["where"].startswith(str(path))]
    static = next(c for c in report["checks"] if c["name"].startswith("static check"))
    assert static["status"] == "ok"


def test_syntax_error_fails(tmp_path: Path) -> None:
    path = tmp_path / "broken.py"
    path.write_text("def train(:\n    pass\n")
    out = doctor(str(path))
    assert out.returncode == 1
    assert f"fail  script {path}: syntax error, line 1" in out.stdout


def test_missing_script_is_one_line() -> None:
    out = doctor("no_such_train.py")
    assert out.returncode == 66
    assert out.stderr == "torchleak: error: no such script: no_such_train.py\n"


def test_low_open_file_limit_warns_with_the_command_to_raise_it() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard <= 1024:
        pytest.skip("the hard limit is already low here")

    def lower() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (1024, hard))

    report = json.loads(doctor("--json", preexec=lower).stdout)
    check = next(c for c in report["checks"] if c["name"] == "open files (ulimit -n)")
    assert check["status"] == "warn" and check["value"].startswith("1024 ")
    target = 65536 if hard == resource.RLIM_INFINITY else min(hard, 65536)
    assert check["fix"] == f"ulimit -n {target}"
    assert doctor("--strict", preexec=lower).returncode == 1


def test_terminal_table_folds_long_text_instead_of_cutting_it(cow_script: Path) -> None:
    import io

    from torchleak.check import check_source
    from torchleak.system.doctor import run_doctor
    from torchleak.system.doctor_render import render_rich

    report = run_doctor(cow_script, static_check=check_source, with_torch=False)
    stream = io.StringIO()
    render_rich(report, stream)
    text = stream.getvalue()
    assert "…" not in text and "..." not in text
    assert "persistent_workers=False" in text and "copy-on-read" in text
    flat = " ".join(text.split())
    for check in report.checks:
        assert check.status in flat


def test_without_a_script_no_proposal_names_a_file_the_user_may_not_have(
        machine_json: dict) -> None:
    from torchleak.system.allocator import detect_allocator

    commands = [p["change"] for p in machine_json["proposals"]]  # `torchleak doctor --json`
    assert not [c for c in commands if ".py" in c.replace("<your_script.py>", "")], commands
    if detect_allocator().is_glibc:  # the --safe proposal is made, with the placeholder
        assert "torchleak run --safe <your_script.py>" in commands
