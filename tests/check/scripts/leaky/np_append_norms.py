"""Tracks the gradient norm of every step with np.append."""
import numpy as np
import torch
from torch import nn

model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 2))
optimizer = torch.optim.Adam(model.parameters(), lr=3e-4)
grad_norms = np.array([])


def train_epoch(loader) -> None:
    global grad_norms
    for x, y in loader:
        loss = nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        grad_norms = np.append(grad_norms, norm.item())


if __name__ == "__main__":
    data = [(torch.randn(16, 64), torch.randint(0, 2, (16,))) for _ in range(100)]
    for epoch in range(30):
        train_epoch(data)
