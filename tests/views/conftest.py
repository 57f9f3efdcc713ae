"""Fixtures for the views' tests: synthetic traces (fast) and one real recorded run (shared)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from .synthetic import make_trace

REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO / "test-artifacts" / "views"

TRAIN_SCRIPT = textwrap.dedent("""
    import torch

    model = torch.nn.Linear(32, 4)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    losses = []
    for step in range(60):
        x = torch.randn(64, 32)
        loss = model(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss)  # the leak: every loss keeps its autograd graph
    print("trained", len(losses))
""")


@pytest.fixture
def leak_run(tmp_path: Path) -> Path:
    """A finished run with a recorded report: one finding with an OOM projection."""
    return make_trace(tmp_path / "runs" / "leaky-20250101-000000").parent


@pytest.fixture
def clean_run(tmp_path: Path) -> Path:
    """A finished run without a report, CUDA or findings: the views must still draw it."""
    return make_trace(tmp_path / "runs" / "clean-20250101-000001", leak=False, report=False,
                      cuda=False, name="clean").parent


@pytest.fixture(scope="session")
def recorded_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One real `torchleak run` of a small CPU training loop, shared by every test using it."""
    work = tmp_path_factory.mktemp("recorded")
    (work / "train.py").write_text(TRAIN_SCRIPT)
    out = work / "runs" / "train-real"
    env = dict(os.environ, TORCHLEAK_RUNS_DIR=str(work / "runs"))
    proc = subprocess.run([sys.executable, "-m", "torchleak", "run", "--out", str(out), "train.py"],
                          cwd=work, env=env, capture_output=True, text=True, timeout=120)
    if not (out / "trace.sqlite").exists():
        pytest.fail(f"torchleak run wrote no trace (rc {proc.returncode}): {proc.stderr[-2000:]}")
    assert "trained 60" in proc.stdout
    return out


@pytest.fixture
def artifacts() -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return ARTIFACTS
