"""Running loss as plain numbers, reported every epoch."""
import torch
from torch import nn

model = nn.Sequential(nn.Linear(6, 32), nn.ReLU(), nn.Linear(32, 1))
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
data = [(torch.randn(64, 6), torch.randn(64, 1)) for _ in range(20)]

for epoch in range(200):
    total, count = 0.0, 0
    for x, y in data:
        loss = nn.functional.mse_loss(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        total += loss.item()
        count += 1
    print(f"epoch {epoch}: {total / count:.4f}")
