"""torch.compile sees nothing of torchleak: a compiled model trained with an optimizer
step outside the compiled code compiles the same graphs as without torchleak (the global
forward hooks that count steps before the first optimizer step stay, inert, once the
compiler has seen them: removing them would recompile)."""

from __future__ import annotations

from pathlib import Path

import pytest
from recordkit import Recorded, RunPool, prefetch, record, run_python, weight, write_script

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
