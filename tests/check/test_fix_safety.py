"""Fixes that could change behaviour are unsafe: ``--fix`` leaves them, ``--unsafe-fixes``
applies them, and the summary says so."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from torchleak.check import check_source
from torchleak.check.fixes import apply_fixes

LOOP = """\
def train(model, loader, optimizer, criterion):
    total_loss = 0
    for x, y in loader:
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
        total_loss += loss
{after}
"""


def _fix(code: str, source: str) -> tuple[bool, str]:
    [d] = [d for d in check_source(source, "t.py") if d.code == code]
    assert d.fix is not None
    fixed, _ = apply_fixes(source, [d], unsafe=True)
    return d.fix.safe, fixed


def test_item_is_unsafe_when_the_total_is_used_as_a_tensor_later() -> None:
    safe, fixed = _fix("TL101", LOOP.format(after="    print(total_loss.item())"))
    assert not safe and "total_loss += loss.item()" in fixed
    safe, _ = _fix("TL101", LOOP.format(after="    return total_loss"))
    assert not safe  # the caller may call tensor methods on it


def test_item_is_safe_when_the_total_is_only_used_as_a_number() -> None:
    after = '    avg = total_loss / len(loader)\n    print(f"loss {avg:.3f}")'
    safe, _ = _fix("TL101", LOOP.format(after=after))
    assert safe


def test_close_is_unsafe_before_a_later_savefig() -> None:
    source = """\
import matplotlib.pyplot as plt


def plot(epochs):
    for epoch in epochs:
        plt.figure()
        plt.plot(epoch)
    plt.savefig("all.png")
"""
    safe, fixed = _fix("TL104", source)
    assert not safe and "plt.close()" in fixed
    safe, _ = _fix("TL104", source.replace('    plt.savefig("all.png")\n', ""))
    assert safe


def test_no_grad_is_unsafe_when_the_function_returns_outputs() -> None:
    source = """\
import torch


def evaluate(model, val_loader):
    outs = []
    for x, y in val_loader:
        outs.append(model(x).argmax(1))
    return outs
"""
    assert not _fix("TL301", source)[0]
    counting = source.replace("outs.append(model(x).argmax(1))", "n = model(x).sum().item()")
    assert _fix("TL301", counting.replace("return outs", "return 1"))[0]


def test_detach_is_unsafe_on_a_model_output_of_unknown_type() -> None:
    source = """\
outputs = []
for batch in loader:
    out = model(batch)
    out.logits.sum().backward()
    outputs.append(out)
"""
    safe, _ = _fix("TL102", source)
    assert not safe  # ``out`` may be a tuple or a ModelOutput


def test_cli_applies_only_safe_fixes_without_the_flag(tmp_path: Path) -> None:
    path = tmp_path / "train.py"
    source = LOOP.format(after="    print(total_loss.item())")
    path.write_text(source)
    run = [sys.executable, "-m", "torchleak", "check", "--isolated", "train.py"]
    result = subprocess.run(run + ["--fix"], cwd=tmp_path, capture_output=True, text=True,
                            timeout=120)
    assert path.read_text() == source and result.returncode == 1
    assert "1 more with `--unsafe-fixes`" in result.stdout
    assert "All checks passed" not in result.stdout
    result = subprocess.run(run + ["--fix", "--unsafe-fixes"], cwd=tmp_path,
                            capture_output=True, text=True, timeout=120)
    assert "total_loss += loss.item()" in path.read_text(), result.stdout + result.stderr
