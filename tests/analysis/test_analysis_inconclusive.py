"""Runs too short, or without a step boundary, are inconclusive and say why."""

from __future__ import annotations

from pathlib import Path

import torch
import torch.nn.functional as F
import torchleak
from harness import record_loop
from loops import make_batches, make_model

SCRIPT = __file__


def five_steps() -> None:
    model = make_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    for x, y in make_batches(5):
        loss = F.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


def manual_updates(steps: int = 60, watch: bool = False) -> None:
    """Plain SGD by hand: no torch.optim optimizer, so no step boundary unless watched."""
    model = make_model()
    batches = make_batches()
    watcher = torchleak.watch()
    kept: list[torch.Tensor] = []
    for step in range(steps):
        x, y = batches[step % len(batches)]
        loss = F.cross_entropy(model(x), y)
        model.zero_grad()
        loss.backward()
        with torch.no_grad():
            for p in model.parameters():
                p -= 0.01 * p.grad
        kept.append(torch.randn(4, 2048))  # a leak, to show what watch() makes visible
        if watch:
            watcher.step()


def test_five_steps_are_inconclusive(tmp_path: Path) -> None:
    report = record_loop(five_steps, tmp_path, "five", SCRIPT).report
    assert report.verdict == "inconclusive"
    assert report.steps == 5
    assert "5" in report.reason and "steps" in report.reason


def functional_updates(steps: int = 60) -> None:
    """No optimizer and no nn.Module: nothing marks a step (time samples start only after
    30 s of that)."""
    weight = torch.randn(64, 4, requires_grad=True)
    for _ in range(steps):
        loss = (torch.randn(8, 64) @ weight).pow(2).mean()
        loss.backward()
        with torch.no_grad():
            weight -= 0.01 * weight.grad
            weight.grad = None


def test_a_loop_without_optimizer_module_or_watch_is_inconclusive(tmp_path: Path) -> None:
    report = record_loop(functional_updates, tmp_path, "functional", SCRIPT).report
    assert report.verdict == "inconclusive"
    assert report.steps == 0
    assert "watch" in report.reason


def test_a_loop_without_optimizer_counts_the_models_forward_calls(tmp_path: Path) -> None:
    run = record_loop(manual_updates, tmp_path, "manual", SCRIPT)
    assert run.report.steps == 60 - 8  # the first 8 forward calls are never steps
    assert run.report.verdict == "leak", run.explain()


def test_watch_gives_the_same_loop_its_steps(tmp_path: Path) -> None:
    run = record_loop(lambda: manual_updates(watch=True), tmp_path, "watched", SCRIPT)
    assert run.report.steps == 60
    assert run.report.verdict == "leak", run.explain()
    assert any("manual_updates().kept" in f.culprit or "kept" in f.culprit
               for f in run.report.findings if f.severity in ("high", "medium")), run.explain()
