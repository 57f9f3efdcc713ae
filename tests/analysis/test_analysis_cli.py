"""End to end through ``python -m torchleak run --json``: what a user's CI sees.

The three runs start together (each pays seconds of torch import in its own process).
"""

from __future__ import annotations

import subprocess
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from harness import run_cli

pytestmark = pytest.mark.slow

PRELUDE = """
    import torch
    import torch.nn.functional as F

    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    batches = [(torch.randn(16, 32), torch.randint(0, 10, (16,))) for _ in range(16)]
"""

LEAKY = PRELUDE + """
    class Trainer:
        def __init__(self):
            self.train_outputs = []

        def fit(self, steps):
            for step in range(steps):
                x, y = batches[step % 16]
                logits = model(x)
                loss = F.cross_entropy(logits, y)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                self.train_outputs.append(logits)  # kept with its graph: the leak


    Trainer().fit(200)
"""

HEALTHY = PRELUDE + """
    def fit(steps):
        running_loss = 0.0
        for step in range(steps):
            x, y = batches[step % 16]
            loss = F.cross_entropy(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            running_loss += loss.item()
            if step % 25 == 24:
                running_loss = 0.0


    fit(200)
"""

CRASHING = PRELUDE + """
    kept = []
    for step in range(120):
        x, y = batches[step % 16]
        loss = F.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        kept.append(torch.randn(4, 2048))
        if step == 99:
            raise RuntimeError("diverged")
"""

Result = tuple[subprocess.CompletedProcess[str], dict[str, Any] | None]


@pytest.fixture(scope="module")
def cli_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Result]:
    jobs = {"leaky": (LEAKY, ("--fail-on-leak",)), "healthy": (HEALTHY, ("--fail-on-leak",)),
            "crashing": (CRASHING, ("--fail-on-leak",))}
    with ThreadPoolExecutor(max_workers=3) as pool:
        futures = {name: pool.submit(run_cli, tmp_path_factory.mktemp(name), source, *options)
                   for name, (source, options) in jobs.items()}
        return {name: future.result() for name, future in futures.items()}


def test_a_leak_fails_the_run_with_exit_code_3(cli_runs: dict[str, Result]) -> None:
    proc, report = cli_runs["leaky"]
    assert proc.returncode == 3, proc.stderr
    assert report is not None and report["verdict"] == "leak", report
    culprits = [f["culprit"] for f in report["findings"] if f["severity"] in ("high", "medium")]
    assert any("Trainer.train_outputs" in c for c in culprits), culprits
    top = next(f for f in report["findings"] if "Trainer.train_outputs" in f["culprit"])
    assert top["kind"] == "tensor_list_graph"
    assert 0.5 * 640 <= top["bytes_per_step"] <= 4 * 640 + 2048, top  # 16 x 10 float32 logits
    assert top["detected_at_step"] is not None and top["detected_at_step"] <= 61, top


def test_a_healthy_run_exits_0_with_no_leak(cli_runs: dict[str, Result]) -> None:
    proc, report = cli_runs["healthy"]
    assert proc.returncode == 0, proc.stderr
    assert report is not None and report["verdict"] == "no_leak", report
    assert not [f for f in report["findings"] if f["severity"] in ("high", "medium")], report
    assert report["steps"] == 200


def test_a_crashing_script_keeps_its_exit_code_and_still_writes_the_json(
        cli_runs: dict[str, Result]) -> None:
    proc, report = cli_runs["crashing"]
    assert proc.returncode == 1, proc.stderr  # the script's own failure, not 3
    assert "diverged" in proc.stderr
    assert report is not None, proc.stderr
    assert report["steps"] == 100
    assert report["run"].get("status") == "crashed", report["run"]
    assert report["verdict"] == "leak", report  # what was recorded up to the crash
    assert any("kept" in f["culprit"] for f in report["findings"]), report
