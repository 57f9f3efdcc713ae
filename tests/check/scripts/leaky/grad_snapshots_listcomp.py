"""Snapshots of every parameter's gradient, every step, for a later plot."""
import torch
import torch.nn.functional as F
from torch import nn


def fit(model: nn.Module, train_loader, epochs: int = 10) -> list:
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    grad_history = []
    for epoch in range(epochs):
        model.train()
        for x, y in train_loader:
            loss = F.nll_loss(model(x).log_softmax(-1), y)
            optimizer.zero_grad()
            loss.backward()
            grad_history.append([p.grad.clone() for p in model.parameters()])
            optimizer.step()
    return grad_history


if __name__ == "__main__":
    batches = [(torch.randn(16, 50), torch.randint(0, 5, (16,))) for _ in range(40)]
    fit(nn.Sequential(nn.Linear(50, 200), nn.ReLU(), nn.Linear(200, 5)), batches)
