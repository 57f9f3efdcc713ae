"""Tracks which samples were seen (a set of ids) and this step's gradient norms."""
import torch
import torch.nn.functional as F
from torch import nn

model = nn.Sequential(nn.Linear(4, 32), nn.ReLU(), nn.Linear(32, 2))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
data = [(torch.randn(8, 4), torch.randint(0, 2, (8,)), list(range(k * 8, k * 8 + 8)))
        for k in range(10)]
seen_ids = set()

for epoch in range(500):
    for x, y, ids in data:
        loss = F.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        for sample_id in ids:
            seen_ids.add(sample_id)
        grad_norms = {}
        for name, p in model.named_parameters():
            grad_norms[name] = p.grad.norm()
