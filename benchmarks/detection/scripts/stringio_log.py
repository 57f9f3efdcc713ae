"""A long text line per step written to an in-memory log."""
import io

import torch
import torch.nn.functional as F

torch.manual_seed(0)
torch.set_num_threads(1)
model = torch.nn.Linear(64, 10)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
log = io.StringIO()
for step in range(1200):
    x, y = torch.randn(32, 64), torch.randint(0, 10, (32,))
    loss = F.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    log.write(f"step {step} loss {loss.item():.6f} " + "w" * 31000 + "\n")
print("done")
