"""Whole training scripts: every leaky one is flagged at the line where its container
grows, healthy ones get no finding, and a fix that only detaches leaves the growth
reported."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from torchleak.check import check_source

HERE = Path(__file__).parent
SCRIPTS = HERE / "scripts"
LEAKY = json.loads((SCRIPTS / "manifest.json").read_text(encoding="utf-8"))["leaky"]
HEALTHY = sorted((SCRIPTS / "healthy").glob("*.py"))
DETECTION = HERE.parents[1] / "benchmarks" / "detection"


def _lines_flagged(path: Path, select: list[str] | None = None) -> list[str]:
    source = path.read_text(encoding="utf-8")
    lines = source.splitlines()
    return [lines[d.line - 1] for d in check_source(source, path.name, select=select)]


def test_every_leaky_script_is_listed() -> None:
    assert sorted(LEAKY) == sorted(p.name for p in (SCRIPTS / "leaky").glob("*.py"))
    assert len(LEAKY) >= 15 and len(HEALTHY) >= 15


@pytest.mark.parametrize("name", sorted(LEAKY))
def test_leaky_script_flagged_at_its_growth_line(name: str) -> None:
    flagged = _lines_flagged(SCRIPTS / "leaky" / name)
    assert any(LEAKY[name] in line for line in flagged), flagged


@pytest.mark.parametrize("path", HEALTHY, ids=lambda p: p.stem)
def test_healthy_script_has_no_finding(path: Path) -> None:
    assert _lines_flagged(path, select=["ALL"]) == []


def test_detection_scripts_flagged_at_a_named_site() -> None:
    manifest = json.loads((DETECTION / "manifest.json").read_text(encoding="utf-8"))
    hits, healthy_flagged, leaky = 0, [], 0
    for entry in manifest["scripts"]:
        flagged = _lines_flagged(DETECTION / "scripts" / entry["script"], select=["ALL"])
        if entry["leaky"] and entry.get("checker", True):  # not torch's own state
            leaky += 1
            hits += any(site in line for site in entry["sites"] for line in flagged)
        elif entry["leaky"]:
            continue
        elif flagged:
            healthy_flagged.append(entry["script"])
    assert healthy_flagged == []
    assert hits >= leaky - 1, f"{hits} of {leaky}"


PLAIN = """\
import torch
from torch import nn

model = nn.Linear(8, 2)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
history = []
for step in range(1000):
    loss = model(torch.randn(4, 8)).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    history.append(torch.randn(4, 64))
"""

CACHE = """\
import torch
from torch import nn

model = nn.Linear(8, 2)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
pred_cache = {}
for epoch in range(10):
    for step in range(100):
        out = model(torch.randn(4, 8))
        loss = out.pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        pred_cache[(epoch, step)] = out
    print(epoch)
"""


FLAT = """\
import torch
from torch import nn

model = nn.Linear(8, 2)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
pred_cache = {}
for step in range(1000):
    out = model(torch.randn(4, 8))
    loss = out.pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    pred_cache[step] = out
"""


def _cli(tmp_path: Path, source: str, *args: str) -> tuple[int, str, str]:
    script = tmp_path / "train.py"
    script.write_text(source, encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "torchleak", "check", *args, str(script)],
                          capture_output=True, text=True, timeout=120)
    return done.returncode, done.stdout, script.read_text(encoding="utf-8")


def test_module_level_history_of_tensors_is_flagged(tmp_path: Path) -> None:
    rc, out, _ = _cli(tmp_path, PLAIN, "--select", "ALL", "--output-format", "concise")
    assert rc == 1 and "All checks passed" not in out
    assert "train.py:12:5: TL107" in out and "a tensor every step" in out


def test_unsafe_fixes_on_a_step_keyed_dict_bound_it_or_leave_a_finding(tmp_path: Path) -> None:
    # inside an epoch loop: the graph is dropped and the dict is cleared every epoch
    rc, out, fixed = _cli(tmp_path, CACHE, "--fix", "--unsafe-fixes",
                          "--output-format", "concise")
    assert "pred_cache[(epoch, step)] = out.detach()" in fixed
    assert "    print(epoch)\n    pred_cache.clear()\n" in fixed
    assert rc == 0 and check_source(fixed, "t.py") == []
    # no epoch loop: only the detach can be applied, and the growth stays reported
    rc, out, fixed = _cli(tmp_path, FLAT, "--fix", "--unsafe-fixes",
                          "--output-format", "concise")
    assert "pred_cache[step] = out.detach()" in fixed
    assert rc == 1 and "TL107" in out and "all checks passed" not in out.lower()
    assert "1 remaining" in out


def test_detach_alone_is_never_called_a_full_fix() -> None:
    for source in (CACHE, FLAT):
        [graph] = [d for d in check_source(source, "t.py") if d.code == "TL102"]
        assert "still gains an entry every step" in graph.message
        assert graph.fix is not None and "still grows" in graph.fix.message


def test_clear_at_epoch_end_is_an_unsafe_fix_tied_to_its_loop(tmp_path: Path) -> None:
    source = CACHE.replace("= out\n", "= out.detach()\n")
    [d] = check_source(source, "t.py")
    assert d.code == "TL107" and d.fix is not None and not d.fix.safe
    assert "loop on line 7" in d.fix.message
    rc, _out, fixed = _cli(tmp_path, source, "--fix")
    assert "clear()" not in fixed and rc == 1  # not without --unsafe-fixes
    rc, out, fixed = _cli(tmp_path, source, "--fix", "--unsafe-fixes")
    assert "    print(epoch)\n    pred_cache.clear()\n" in fixed
    assert rc == 0 and check_source(fixed, "t.py") == []


def test_anomaly_mode_is_not_called_growth() -> None:
    source = "import torch\n\ntorch.autograd.set_detect_anomaly(True)\n"
    [d] = check_source(source, "t.py")
    assert d.code == "TL106" and "grows every step" not in d.message
    assert "slower" in d.message and "traceback" in d.message


def test_plain_list_gets_an_unsafe_bounded_window(tmp_path: Path) -> None:
    source = '"""A script."""\nfrom __future__ import annotations\n\n' + PLAIN
    [d] = check_source(source, "t.py")
    assert d.code == "TL107" and d.fix is not None and not d.fix.safe
    assert "deque(maxlen=1000)" in d.fix.message and "unsafe" in d.fix.message
    rc, out, fixed = _cli(tmp_path, source, "--fix", "--unsafe-fixes")
    assert "history = collections.deque(maxlen=1000)" in fixed
    assert "from torch import nn\nimport collections\n" in fixed  # after the imports
    assert rc == 0 and check_source(fixed, "t.py") == []


def test_notebook_fix_is_offered_only_inside_the_findings_cell(tmp_path: Path) -> None:
    setup, loop = PLAIN.split("for step")
    cells = [setup, "for step" + loop]
    notebook = {"cells": [{"cell_type": "code", "execution_count": None, "metadata": {},
                           "outputs": [], "source": c} for c in cells],
                "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    path = tmp_path / "nb.ipynb"
    path.write_text(json.dumps(notebook, indent=1) + "\n", encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "torchleak", "check", "--fix",
                           "--unsafe-fixes", "--output-format", "concise", str(path)],
                          capture_output=True, text=True, timeout=120)
    # the list is made in cell 1 and grows in cell 2: no cross-cell rewrite, no error
    assert "cell 2:" in done.stdout and "TL107" in done.stdout
    assert done.returncode == 1 and not done.stderr
    assert json.loads(path.read_text(encoding="utf-8")) == notebook
