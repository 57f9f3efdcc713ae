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



# Run in a process of its own: once dynamo is loaded (by any earlier test in this one) the
# global hooks stay for good.
NARROWED = """
import copy, io, json, sys
import torch
from torch import nn
import torchleak
from torch.nn.modules import module as torch_module
from torchleak.record.steps import NARROW_CALLS

def global_hooks():
    return len(torch_module._global_forward_hooks) + len(torch_module._global_forward_pre_hooks)

class Policy(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 2))
    def forward(self, x):
        return self.net(x)

class Scored(nn.Module):  # a class with a __call__ of its own
    calls = 0
    def __init__(self):
        super().__init__()
        self.head = nn.Linear(8, 1)
    def forward(self, x):
        return self.head(x)
    def __call__(self, *args, **kwargs):
        type(self).calls += 1
        return super().__call__(*args, **kwargs)

own_call = Scored.__dict__["__call__"]
out = {"dynamo_at_start": "torch._dynamo" in sys.modules, "narrow_calls": NARROW_CALLS}
before = global_hooks()
policy = Policy()
with torch.no_grad(), torchleak.monitor(out="rollout", quiet=True) as monitor:
    for call in range(60):
        policy(torch.randn(4, 8))
        if "narrowed_at" not in out and global_hooks() == before:
            out["narrowed_at"] = call + 1
            out["patched"] = "__call__" in Policy.__dict__
    buffer = io.BytesIO()
    torch.save(policy, buffer)  # nothing of ours on the instance
    twin = copy.deepcopy(policy)
    for _ in range(10):
        twin(torch.randn(4, 8))  # another instance of the class: still the step
    buffer.seek(0)
    loaded = torch.load(buffer, weights_only=False)
    out["loaded_equal"] = torch.equal(loaded.net[0].weight, policy.net[0].weight)
    import cloudpickle  # copies a class of __main__ by value, its __dict__ included
    with open("policy.pkl", "wb") as handle:
        handle.write(cloudpickle.dumps(policy))
out["steps"] = monitor.report.steps
out["restored"] = "__call__" not in Policy.__dict__ and global_hooks() == before

scored = Scored()
with torch.no_grad(), torchleak.monitor(out="own", quiet=True) as monitor:
    for call in range(40):
        if call == 30:
            try:
                scored(torch.randn(4, 3))  # wrong width: raises, closes no step
            except RuntimeError:
                out["raised"] = True
        scored(torch.randn(4, 8))
out["scored_calls"] = Scored.calls
out["scored_steps"] = monitor.report.steps
out["own_call_back"] = Scored.__dict__["__call__"] is own_call

def compiled_late(name):
    from torch._dynamo.testing import CompileCounter  # the first time: after narrowing
    from torch._dynamo.eval_frame import OptimizedModule
    torch._dynamo.reset()
    policy, counter = Policy(), CompileCounter()
    with torch.no_grad(), torchleak.monitor(out=name, quiet=True) as monitor:
        for _ in range(30):
            policy(torch.randn(2, 8))
        compiled = torch.compile(policy, backend=counter)
        for _ in range(20):
            compiled(torch.randn(2, 8))
        out[name + "_wrapped"] = "__call__" in OptimizedModule.__dict__ and global_hooks() == before
        out[name + "_frames"] = counter.frame_count
    out[name + "_steps"] = monitor.report.steps

compiled_late("late")
torch.optim.SGD(Policy().parameters(), lr=0.1)  # an optimizer made (it loads dynamo), never stepped
out["dynamo_loaded"] = "torch._dynamo" in sys.modules
compiled_late("loaded")
print(json.dumps(out))
"""


# Where a module pickled by value during the run is unpickled: no torchleak there.
UNPICKLED = """
import pickle, sys
sys.modules["torchleak"] = None
import torch
policy = pickle.load(open("policy.pkl", "rb"))
print(tuple(policy(torch.randn(3, 8)).shape))
"""


def test_a_loop_with_no_optimizer_keeps_the_global_hooks_only_until_its_step_is_known(
        tmp_path: Path) -> None:
    """Then the outermost classes' ``__call__`` counts the steps (submodule calls take
    torch's fast path again): every instance of them is counted, pickled and copied as
    under python (cloudpickle's copy by value included, unpickled with no torchleak), a
    class's own ``__call__`` still runs and comes back, a raising forward closes no step,
    and a module compiled later counts as under the hooks."""
    import subprocess
    import sys

    pytest.importorskip("cloudpickle")
    script = tmp_path / "rollout.py"
    script.write_text(NARROWED)
    done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["dynamo_at_start"] is False
    assert out["narrowed_at"] == out["narrow_calls"] and out["patched"]
    assert out["loaded_equal"]
    assert out["steps"] == 70 - 8  # the first 8 calls never close a step
    assert out["restored"]
    assert out["raised"] and out["scored_calls"] == 41 and out["scored_steps"] == 40 - 8
    assert out["own_call_back"]
    assert out["dynamo_loaded"]
    for name in ("late", "loaded"):  # compiled after narrowing; dynamo loaded before it
        assert out[f"{name}_wrapped"]  # torch.compile's wrapper class counts, no hooks back
        assert out[f"{name}_frames"] == 1  # compiled once
        # Counted as under the hooks alone: the wrapper, a class of its own, takes over as
        # the step at its second call.
        assert out[f"{name}_steps"] == 50 - 8 - 1
    (tmp_path / "unpickle.py").write_text(UNPICKLED)
    copy = subprocess.run([sys.executable, "unpickle.py"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120)
    assert copy.returncode == 0 and copy.stdout.strip() == "(3, 2)", copy.stderr
