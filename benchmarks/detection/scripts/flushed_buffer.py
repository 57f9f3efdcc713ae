"""Per-step embeddings buffered and written out every 150 steps."""
import io

import torch
import torch.nn.functional as F

torch.manual_seed(0)
torch.set_num_threads(1)
model = torch.nn.Sequential(torch.nn.Linear(128, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
pending = []
sink = io.BytesIO()
for step in range(900):
    x, y = torch.randn(64, 128), torch.randint(0, 10, (64,))
    hidden = model[1](model[0](x))
    loss = F.cross_entropy(model[2](hidden), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    pending.append(hidden.detach().clone())
    if len(pending) == 150:
        torch.save(torch.stack(pending).mean(0), sink)
        sink.seek(0)
        sink.truncate()
        pending.clear()
print("done")
