"""Per-step losses kept for the epoch's mean, then cleared."""
import torch
import torch.nn.functional as F
from torch import nn

model = nn.Linear(16, 4)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
loader = [(torch.randn(32, 16), torch.randint(0, 4, (32,))) for _ in range(25)]
step_losses = []
epoch_means = []

for epoch in range(40):
    for x, y in loader:
        loss = F.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        step_losses.append(loss.detach())
    epoch_means.append(torch.stack(step_losses).mean().item())
    step_losses.clear()
