"""End to end through ``python -m torchleak run --json``: what a user's CI sees.

The four runs start together (each pays seconds of torch import in its own process).
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
            "crashing": (CRASHING, ("--fail-on-leak",)), "module": (LEAKY, ())}
    with ThreadPoolExecutor(max_workers=4) as pool:
        futures = {name: pool.submit(run_cli, tmp_path_factory.mktemp(name), source, *options,
                                     module="trainpkg.leaky" if name == "module" else None)
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


def test_a_module_run_points_at_the_source_line_as_a_script_run_does(
        cli_runs: dict[str, Result]) -> None:
    """``torchleak run -m trainpkg.leaky``: the finding says `at trainpkg/leaky.py:N`,
    the same line the script run names."""
    sources = {}
    for name in ("leaky", "module"):
        proc, report = cli_runs[name]
        assert report is not None and report["verdict"] == "leak", (proc.stderr, report)
        top = next(f for f in report["findings"] if "train_outputs" in f["culprit"])
        sources[name] = top["source"]
    assert sources["module"] is not None, sources
    assert sources["module"].startswith("trainpkg/leaky.py:"), sources
    assert sources["module"].split(":", 1)[1] == sources["leaky"].split(":", 1)[1]
    assert "self.train_outputs.append(logits)" in sources["module"]


def test_the_module_file_is_found_without_importing_its_package(
        tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: ANN001
    from torchleak.analysis.sources import find_source, module_file

    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("raise SystemExit('a report ran user code')\n")
    (package / "sub" / "__init__.py").write_text("")
    (package / "sub" / "train.py").write_text("kept = []\nfor i in range(3):\n"
                                              "    kept.append(i)\n")
    (package / "__main__.py").write_text("history = []\nhistory += [1]\n")
    monkeypatch.chdir(tmp_path)
    assert module_file("pkg.sub.train") == "pkg/sub/train.py"
    assert module_file("pkg") == "pkg/__main__.py"  # a package runs its __main__
    assert module_file("pkg.nothing") is None and module_file("not a name") is None
    assert find_source("-m pkg.sub.train", "list", "kept") == "pkg/sub/train.py:3: kept.append(i)"
    assert find_source("-m pkg", "list", "history") == "pkg/__main__.py:2: history += [1]"
