"""A walk at each epoch end, within a share: a small dataset trained for hundreds of short
epochs must not pay a holder walk at every one of them."""

from __future__ import annotations

from pathlib import Path

from recordkit import record, write_script

from torchleak.record.plan import PHASE_BUDGETS, PHASE_WALKS_FREE

EPOCHS = 300

MANY_SHORT_EPOCHS = f"""
import torch
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
data = TensorDataset(torch.randn(128, 32), torch.randint(0, 4, (128,)))
loader = DataLoader(data, batch_size=32, shuffle=True)  # 4 steps an epoch
model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4))
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
seen = []  # a per-epoch list emptied at each epoch's end: healthy
for epoch in range({EPOCHS}):
    for x, y in loader:
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        seen.append(loss.item())
    seen.clear()
print("done")
"""


def test_many_short_epochs_pay_their_walks_within_the_share(tmp_path: Path) -> None:
    run = record(tmp_path, write_script(tmp_path, "epochs.py", MANY_SHORT_EPOCHS),
                 options=("--quiet",))
    assert run.proc.returncode == 0, run.proc.stderr
    assert run.proc.stdout.strip() == "done"
    phase = run.meta("phase_walks")
    walks = [ms / 1000 for (ms,) in run.rows(
        "SELECT duration_ms FROM holder_walks WHERE reason = 'phase' ORDER BY step")]
    assert phase["runs"] == len(walks) >= PHASE_WALKS_FREE
    assert phase["runs"] + phase["skipped"] == EPOCHS - 1  # every epoch end after the first
    assert phase["skipped"] > 0
    # Past the free ones, the walks stay within their share of the run's wall time (one
    # walk's margin: each is admitted on its expected cost, then measured).
    budget = run.meta("budget_pct") / 100
    share = PHASE_BUDGETS * budget * run.meta("process_seconds")
    assert sum(walks[PHASE_WALKS_FREE:]) <= share + max(walks)
    assert run.judgement("final").verdict == "no_leak"  # type: ignore[union-attr]
