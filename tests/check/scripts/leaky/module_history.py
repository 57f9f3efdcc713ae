"""Notebook-style script: a module-level history of random features, one per step."""
import torch
from torch import nn

model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 4))
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
criterion = nn.CrossEntropyLoss()
history = []

for step in range(300):
    x = torch.randn(16, 32)
    y = torch.randint(0, 4, (16,))
    loss = criterion(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    history.append(torch.randn(16, 64))
    if step % 50 == 0:
        print(step, loss.item())
