"""Loops with no optimizer: a step is one forward call of the outermost module, else a
time sample; training loops keep optimizer steps and lose the forward hooks at once."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
import torch
from torch import nn
from torch.nn.modules import module as torch_module

import torchleak
from torchleak.record.steps import TimeSteps

pytestmark = pytest.mark.integrations


def meta(trace: Path, key: str) -> object:
    conn = sqlite3.connect(f"file:{trace}?mode=ro", uri=True)
    try:
        (value,) = conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
    finally:
        conn.close()
    return json.loads(value)


def global_hooks() -> int:
    return len(torch_module._global_forward_hooks) + len(torch_module._global_forward_pre_hooks)


def test_an_evaluation_loop_counts_outermost_forward_calls(tmp_path: Path) -> None:
    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 8)).eval()
    outputs = []
    with torchleak.monitor(out=str(tmp_path / "eval"), quiet=True) as monitor:
        for _ in range(60):
            outputs.append(model(torch.randn(16, 32)))  # kept with their graphs
    report = monitor.report
    assert report.steps == 52  # the first 8 calls never close a step
    assert report.verdict == "leak"
    assert report.serious[0].culprit.startswith("local outputs in ")
    assert "outermost module" in str(meta(monitor.trace, "step_definition"))


def test_a_policy_and_a_value_network_called_in_turn_make_one_step(tmp_path: Path) -> None:
    policy, value = nn.Linear(8, 2), nn.Sequential(nn.Linear(8, 8), nn.Tanh(), nn.Linear(8, 1))
    with torch.no_grad(), torchleak.monitor(out=str(tmp_path / "rollout"), quiet=True) as monitor:
        for _ in range(20):
            obs = torch.randn(4, 8)
            policy(obs)
            value(obs)
    assert monitor.report.steps == 16  # one per policy+value pair after 8 calls


def test_a_training_loop_keeps_optimizer_steps_and_drops_the_hooks(tmp_path: Path) -> None:
    before = global_hooks()
    model = nn.Sequential(nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    with torchleak.monitor(out=str(tmp_path / "train"), quiet=True) as monitor:
        assert global_hooks() == before + 2
        for step in range(30):
            loss = model(torch.randn(8, 16)).pow(2).mean()
            if step == 0:
                assert global_hooks() == before + 2  # no optimizer step yet
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            assert global_hooks() == before  # gone at the first optimizer step
    assert monitor.report.steps == 30
    assert "optimizer step" in str(meta(monitor.trace, "step_definition"))
    assert global_hooks() == before


def test_compiled_models_see_no_graph_break(tmp_path: Path, recwarn: pytest.WarningsRecorder
                                            ) -> None:
    from torch._dynamo.testing import CompileCounter

    torch._dynamo.reset()
    counter = CompileCounter()
    model = torch.compile(nn.Sequential(nn.Linear(8, 8), nn.ReLU()), backend=counter)
    with torch.no_grad(), torchleak.monitor(out=str(tmp_path / "compiled"), quiet=True) as monitor:
        for _ in range(12):
            model(torch.randn(2, 8))
    assert counter.frame_count == 1  # one graph: the hooks step aside inside the compiler
    assert monitor.report.steps == 4  # the compiled module is still called from the loop
    assert not [w for w in recwarn if "global hooks" in str(w.message)]  # output unchanged


def test_with_neither_a_time_sample_is_the_step(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(TimeSteps, "IDLE", 0.2)
    monkeypatch.setattr(TimeSteps, "INTERVAL", 0.05)
    import time

    kept = []
    with torchleak.monitor(out=str(tmp_path / "timed"), quiet=True) as monitor:
        # Until the sampler has made 5 steps, however few turns a busy machine gives it:
        # the deadline only stops a sampler that never samples.
        deadline = time.monotonic() + 120
        while monitor.recorder.step < 5:
            assert time.monotonic() < deadline, f"{monitor.recorder.step} time samples in 120 s"
            kept.append(torch.randn(256))  # no module, no optimizer
            time.sleep(0.005)
    assert monitor.report.steps >= 5
    assert "one sample every" in str(meta(monitor.trace, "step_definition"))
