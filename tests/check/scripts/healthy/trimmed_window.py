"""Keeps the last 50 losses with an explicit trim."""
import torch
from torch import nn

model = nn.Linear(4, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
recent_losses = []

for step in range(10_000):
    x, y = torch.randn(8, 4), torch.randn(8, 1)
    loss = ((model(x) - y) ** 2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    recent_losses.append(loss.item())
    if len(recent_losses) > 50:
        recent_losses.pop(0)
