"""A hand-written trainer class that records hidden states by global step."""
import torch
import torch.nn.functional as F
from torch import nn


class Trainer:
    def __init__(self, model: nn.Module, lr: float = 1e-3) -> None:
        self.model = model
        self.optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
        self.global_step = 0
        self.hidden_by_step = {}

    def train_step(self, x: torch.Tensor, y: torch.Tensor) -> float:
        hidden = self.model[0](x)
        logits = self.model[2](self.model[1](hidden))
        loss = F.cross_entropy(logits, y)
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        self.hidden_by_step[self.global_step] = hidden.detach().cpu()
        self.global_step += 1
        return loss.item()

    def fit(self, loader, epochs: int) -> None:
        for _epoch in range(epochs):
            for x, y in loader:
                self.train_step(x, y)


if __name__ == "__main__":
    data = [(torch.randn(32, 16), torch.randint(0, 3, (32,))) for _ in range(20)]
    Trainer(nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 3))).fit(data, 10)
