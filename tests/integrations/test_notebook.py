"""torchleak.monitor() in a notebook: IPython's own shell runs the cells (as a kernel
does), the same cell twice in a row, each time a run with its verdict and holder."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from integrationkit import installed

pytestmark = [pytest.mark.integrations,
              pytest.mark.skipif(not installed("IPython"),
                                 reason="needs IPython: pip install ipython")]

KERNEL = '''
import json, sys
from IPython.core.interactiveshell import InteractiveShell

shell = InteractiveShell.instance()
cells = json.loads(sys.argv[1])
results = []
for cell in cells:
    outcome = shell.run_cell(cell)
    results.append({"ok": outcome.success, "error": repr(outcome.error_in_exec)})
print("RESULTS " + json.dumps(results))
'''

SETUP = """
import torch, torchleak
from torch import nn
model = nn.Linear(32, 4)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
history = []
runs = []
"""

TRAIN = """
with torchleak.monitor(out=f"nb-run-{len(runs)}", quiet=True) as m:
    for step in range(60):
        loss = model(torch.randn(16, 32)).pow(2).mean()
        opt.zero_grad(); loss.backward(); opt.step()
        history.append(loss)
runs.append(m.report)
print("VERDICT", m.report.verdict, m.report.steps, m.report.serious[0].culprit)
"""

START_ONLY = """
m = torchleak.monitor(out=f"started-{len(runs)}", quiet=True).start()
runs.append(None)
"""


def test_the_same_cell_twice_gives_two_runs(tmp_path: Path) -> None:
    cells = [SETUP, TRAIN, TRAIN, START_ONLY, START_ONLY]
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(KERNEL), json.dumps(cells)],
                          cwd=tmp_path, text=True, capture_output=True, timeout=180)
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.loads(proc.stdout.split("RESULTS ", 1)[1])
    assert all(r["ok"] for r in results), results  # nothing raised into a cell
    verdicts = [line.split(" ", 3) for line in proc.stdout.splitlines() if line.startswith("VERDICT")]
    assert [v[1:3] for v in verdicts] == [["leak", "60"], ["leak", "60"]]
    assert all(v[3].startswith("global history in notebook (list of Tensor") for v in verdicts)
    assert (tmp_path / "nb-run-0" / "trace.sqlite").is_file()
    assert (tmp_path / "nb-run-1" / "trace.sqlite").is_file()
    # A re-run `start()` cell while the first still records: joined with a warning.
    assert "joins it and records nothing of its own" in proc.stderr
    assert (tmp_path / "started-2" / "trace.sqlite").is_file()
    assert not (tmp_path / "started-3").exists()
