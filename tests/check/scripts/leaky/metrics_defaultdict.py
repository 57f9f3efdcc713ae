"""Per-step metrics gathered in a defaultdict of lists for the whole run."""
from collections import defaultdict

import torch
import torch.nn.functional as F
from torch import nn

metrics = defaultdict(list)


def train(model: nn.Module, loader, epochs: int) -> None:
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    for epoch in range(epochs):
        for x, y in loader:
            logits = model(x)
            loss = F.cross_entropy(logits, y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            metrics["loss"].append(loss.item())
            metrics["probs"].append(logits.softmax(-1).detach())


if __name__ == "__main__":
    data = [(torch.randn(32, 10), torch.randint(0, 3, (32,))) for _ in range(30)]
    train(nn.Linear(10, 3), data, epochs=50)
