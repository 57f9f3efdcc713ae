"""torch.compile sees nothing of torchleak: a compiled model trained with an optimizer
step outside the compiled code compiles the same graphs as without torchleak (the global
forward hooks that count steps before the first optimizer step stay, inert, once the
compiler has seen them: removing them would recompile). An optimizer step inside compiled
code is counted once per real step by the call torchleak puts into the graph of an
optimizer traced whole: no recompile, no graph break, as many graphs. torch's own
optimizers break the graph around their update, so the call is never put in for them
(tests/record/test_record_never_harmful.py: the same graphs with torch.optim.Adam)."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
from recordkit import (Recorded, RunPool, prefetch, record, run_python, weight,
                       without_our_lines, write_script)

pytestmark = pytest.mark.slow

COMPILED_MODEL = """
    import torch
    from torch._dynamo.utils import counters

    torch.manual_seed(0)
    model = torch.compile(torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.ReLU(),
                                              torch.nn.Linear(16, 1)))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    for step in range(30):
        loss = model(torch.randn(8, 16)).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print("graphs", counters["stats"]["unique_graphs"])
    print("loss", round(loss.item(), 4))
"""


@prefetch
@weight(4)
def compiled_model(folder: Path) -> tuple[object, Recorded]:
    script = write_script(folder, "compiled_model.py", COMPILED_MODEL)
    return (run_python([script.name], cwd=folder, timeout=300),
            record(folder, script, options=("--quiet",)))


def test_a_compiled_model_is_not_recompiled_when_the_optimizer_takes_over(
        runs: RunPool) -> None:
    plain, recorded = runs.get(compiled_model)
    assert plain.returncode == recorded.proc.returncode == 0, recorded.proc.stderr[-3000:]
    assert recorded.proc.stdout == plain.stdout  # the same graph count and loss
    assert recorded.meta("step_definition") is not None
    assert recorded.scalar("SELECT MAX(step) FROM steps") == 30
    # The modules inductor generates (in its cache folder) are torch's, not the user's:
    # their globals are no holders.
    assert recorded.scalar("SELECT COUNT(*) FROM holders WHERE holder LIKE 'torch.%'") == 0


# An optimizer of the program's own, whose step() the compiler traces whole (torch's own
# optimizers break the graph around their update). Put into the scripts below.
PLAIN_SGD = """    class PlainSGD(torch.optim.Optimizer):
        def __init__(self, params, lr):
            super().__init__(params, dict(lr=lr))

        @torch.no_grad()
        def step(self):
            for group in self.param_groups:
                for p in group["params"]:
                    if p.grad is not None:
                        p.add_(p.grad, alpha=-group["lr"])
"""


# A whole training step compiled: the optimizer steps inside compiled code, where its
# hook is traced, not run. The counting backend lists each graph's operators, so the
# plain and the recorded run can be compared graph by graph.
COMPILED_STEP = """
    import json
    import re
    import sys

    import torch
    from torch._dynamo.utils import counters

    torch.manual_seed(0)
    torch.set_num_threads(1)
    graphs = []


    def counting(gm, example_inputs):
        graphs.append(sorted({re.sub(" at 0x[0-9a-f]+", "", str(n.target))
                              for n in gm.graph.nodes
                              if n.op in ("call_function", "call_method")}))
        return torch._dynamo.lookup_backend("aot_eager")(gm, example_inputs)


{plain_sgd}

    model = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.ReLU(),
                                torch.nn.Linear(16, 1))
    optimizer = PlainSGD(model.parameters(), lr=0.01)


    @torch.compile(backend=counting)
    def train_step(x):
        loss = model(x).pow(2).mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        return loss


    kept = []
    for step in range({steps}):
        loss = train_step(torch.randn(8, 16))
        if "leak" in sys.argv:
            kept.append(torch.zeros(65536))  # 256 KiB a step, never released
    print("graphs", json.dumps(graphs))
    print("breaks", sum(counters["graph_break"].values()))
    print("recompiles", sum(counters["recompiles"].values()))
    print("loss", round(loss.item(), 4))
"""
STEPS = 60
STEP_CALL = ["torchleak.step.default"]

# Two optimizers of the program's own whose step() the compiler traces whole, stepping in
# turn inside one compiled function (a GAN's D then G).
INLINE_STEPS = """
    import torch
    from torch._dynamo.utils import counters

    torch.manual_seed(0)
    torch.set_num_threads(1)
    graphs = []


    def counting(gm, example_inputs):
        graphs.append(len(gm.graph.nodes))
        return torch._dynamo.lookup_backend("aot_eager")(gm, example_inputs)


{plain_sgd}

    d, g = torch.nn.Linear(16, 1), torch.nn.Linear(8, 16)
    opt_d, opt_g = PlainSGD(d.parameters(), lr=0.01), PlainSGD(g.parameters(), lr=0.01)


    @torch.compile(backend=counting)
    def train_step(z):
        loss_d = d(g(z).detach()).pow(2).mean()
        loss_d.backward()
        opt_d.step()
        opt_d.zero_grad()
        loss_g = (1 - d(g(z))).pow(2).mean()
        loss_g.backward()
        opt_g.step()
        opt_g.zero_grad()
        return loss_g


    for step in range(40):
        loss = train_step(torch.randn(4, 8))
    print("graphs", len(graphs), sum(graphs))
    print("breaks", sum(counters["graph_break"].values()))
    print("recompiles", sum(counters["recompiles"].values()))
    print("loss", round(loss.item(), 4))
"""


def _lines(stdout: str) -> dict[str, str]:
    return dict(line.split(" ", 1) for line in stdout.splitlines() if " " in line)


def _unstamped(stderr: str) -> str:
    """torch's log lines without their time and process id."""
    return re.sub(r"(?m)^([IWEV])\d{4} [\d:.]+ \d+ ", r"\1 ", stderr)


def _compiled_step_script(folder: Path, name: str) -> Path:
    return write_script(folder, name, COMPILED_STEP.replace("{steps}", str(STEPS))
                        .replace("{plain_sgd}", PLAIN_SGD))


@prefetch
@weight(4)
def compiled_step(folder: Path) -> tuple[subprocess.CompletedProcess[str], Recorded, Path]:
    script = _compiled_step_script(folder, "compiled_step.py")
    report = folder / "report.json"
    return (run_python([script.name], cwd=folder, timeout=300),
            record(folder, script, options=("--quiet", "--json", str(report))), report)


@prefetch
@weight(4)
def compiled_leak(folder: Path) -> tuple[Recorded, Path]:
    script = _compiled_step_script(folder, "compiled_leak.py")
    report = folder / "report.json"
    return record(folder, script, "leak", options=("--quiet", "--json", str(report))), report


@prefetch
@weight(3)
def inline_steps(folder: Path) -> tuple[subprocess.CompletedProcess[str], Recorded]:
    script = write_script(folder, "inline_steps.py",
                          INLINE_STEPS.replace("{plain_sgd}", PLAIN_SGD))
    return (run_python([script.name], cwd=folder, timeout=300),
            record(folder, script, options=("--quiet",)))


def test_an_optimizer_step_inside_compiled_code_is_one_step_and_the_run_is_judged(
        runs: RunPool) -> None:
    plain, recorded, report = runs.get(compiled_step)
    assert plain.returncode == recorded.proc.returncode == 0, recorded.proc.stderr[-3000:]
    assert recorded.scalar("SELECT COUNT(*) FROM steps") == STEPS
    assert recorded.meta("step_definition").startswith("one optimizer step cycle")
    assert recorded.rows("SELECT source FROM events WHERE kind = 'step_source' AND message "
                         "LIKE '%inside torch.compile are counted at run time%'") == [
                             ("optimizer",)]
    assert json.loads(report.read_text())["verdict"] == "no_leak"


def test_the_compiled_graphs_are_the_plain_runs_with_the_step_call_in_the_update(
        runs: RunPool) -> None:
    plain, recorded, _ = runs.get(compiled_step)
    before, after = _lines(plain.stdout), _lines(recorded.proc.stdout)
    # No recompile, no graph break, the same training.
    assert {k: after[k] for k in ("breaks", "recompiles", "loss")} == {
        k: before[k] for k in ("breaks", "recompiles", "loss")}
    # As many graphs, the same operators; the one holding the update also makes the step.
    plain_graphs, recorded_graphs = json.loads(before["graphs"]), json.loads(after["graphs"])
    assert len(recorded_graphs) == len(plain_graphs)
    assert [sorted(set(g) - set(STEP_CALL)) for g in recorded_graphs] == plain_graphs
    assert sum(STEP_CALL[0] in g for g in recorded_graphs) == 1
    assert _unstamped(without_our_lines(recorded.proc.stderr)) == _unstamped(plain.stderr)


def test_a_leak_outside_a_compiled_step_is_called_a_leak(runs: RunPool) -> None:
    recorded, report = runs.get(compiled_leak)
    assert recorded.proc.returncode == 0, recorded.proc.stderr[-3000:]
    assert recorded.scalar("SELECT COUNT(*) FROM steps") == STEPS
    found = json.loads(report.read_text())
    assert found["verdict"] == "leak"
    assert found["findings"][0]["culprit"].startswith("global kept in compiled_leak.py")


def test_optimizers_traced_whole_inside_a_compiled_step_keep_every_graph_as_it_was(
        runs: RunPool) -> None:
    plain, recorded = runs.get(inline_steps)
    assert plain.returncode == recorded.proc.returncode == 0, recorded.proc.stderr[-3000:]
    before, after = _lines(plain.stdout), _lines(recorded.proc.stdout)
    assert {k: after[k] for k in ("breaks", "recompiles", "loss")} == {
        k: before[k] for k in ("breaks", "recompiles", "loss")}
    graphs, nodes = map(int, before["graphs"].split())
    # The same graphs, the one holding each update gaining the step call (one node each).
    assert after["graphs"] == f"{graphs} {nodes + 2}"
    assert recorded.scalar("SELECT COUNT(*) FROM steps") == 40  # one per D+G pair


# torch.export, strict, before any optimizer step (torchleak's global forward hooks are
# in place), of a model and of a module whose forward makes the program's own optimizer
# step; then forward calls, which the hooks count as steps again.
EXPORTED = """
    import torch

{plain_sgd}

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU())
    optimizer = PlainSGD(model.parameters(), lr=0.1)


    class Stepping(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = model

        def forward(self, x):
            optimizer.step()
            return self.inner(x)


    for name, module in (("model", model), ("stepping", Stepping())):
        program = torch.export.export(module, (torch.randn(2, 4),), strict=True)
        print(name, sorted({str(n.target) for n in program.graph.nodes
                            if n.op == "call_function"}))
    with torch.no_grad():
        for _ in range(20):
            model(torch.randn(2, 4))
"""


@prefetch
@weight(3)
def exported(folder: Path) -> tuple[subprocess.CompletedProcess[str], Recorded]:
    script = write_script(folder, "exported.py", EXPORTED.replace("{plain_sgd}", PLAIN_SGD))
    return (run_python([script.name], cwd=folder, timeout=300),
            record(folder, script, options=("--quiet",)))


def test_a_strict_export_before_the_first_step_sees_no_torchleak(runs: RunPool) -> None:
    plain, recorded = runs.get(exported)
    assert plain.returncode == 0 and "stepping" in plain.stdout, plain.stderr[-3000:]
    # The same programs (no step call in one), where a global hook made export fail.
    assert recorded.proc.returncode == 0, recorded.proc.stderr[-3000:]
    assert recorded.proc.stdout == plain.stdout
    # The hooks came back: the forward calls after the exports are steps.
    assert recorded.meta("step_definition").startswith("one forward call")
    assert recorded.scalar("SELECT COUNT(*) FROM steps") > 0


# A backend that drops the step call, as a dead-code pass that ignores side effects
# would. Time samples come sooner than in a real run (30 s idle, then every 2 s).
DROPPED_CALL = """
    import time

    from torchleak.live.engine import active_monitor
    from torchleak.record.steps import TimeSteps

    TimeSteps.IDLE, TimeSteps.INTERVAL = 1.0, 0.2
    import torch


    def dropping(gm, example_inputs):
        for node in list(gm.graph.nodes):
            if node.op == "call_function" and str(node.target).startswith("torchleak."):
                gm.graph.erase_node(node)
        gm.recompile()
        return gm.forward


{plain_sgd}

    model = torch.nn.Linear(16, 1)
    optimizer = PlainSGD(model.parameters(), lr=0.01)


    @torch.compile(backend=dropping)
    def train_step(x):
        loss = model(x).pow(2).mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        return loss


    recorder = active_monitor().recorder
    train_step(torch.randn(8, 16))  # compiled here: the step call is traced, then dropped
    # Until 5 time samples, 2 of them after the compile, however few turns a busy machine
    # gives the sampler: the deadline only stops a sampler that never samples.
    enough = max(5, recorder.step + 2)
    deadline = time.monotonic() + 120
    while recorder.step < enough and time.monotonic() < deadline:
        train_step(torch.randn(8, 16))
        time.sleep(0.001)
    print("done", recorder.step)
"""


@prefetch
def dropped_call(folder: Path) -> Recorded:
    return record(folder, write_script(folder, "dropped_call.py",
                                         DROPPED_CALL.replace("{plain_sgd}", PLAIN_SGD)),
                  options=("--quiet",))


def test_compiled_code_that_never_makes_the_step_call_falls_back_to_time_samples(
        runs: RunPool) -> None:
    run = runs.get(dropped_call)
    assert run.proc.returncode == 0 and "done" in run.proc.stdout, run.proc.stderr[-3000:]
    assert run.scalar("SELECT COUNT(*) FROM steps") >= 5
    assert run.meta("step_definition").startswith("one sample every")
    assert run.rows("SELECT source FROM events WHERE kind = 'step_source' AND message "
                    "LIKE '%never made torchleak''s step call%'") == [("time",)]
