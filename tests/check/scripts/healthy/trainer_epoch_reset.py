"""A trainer class whose per-step buffers are re-made at every epoch start."""
import torch
import torch.nn.functional as F
from torch import nn


class Trainer:
    def __init__(self, model: nn.Module) -> None:
        self.model = model
        self.optimizer = torch.optim.Adam(model.parameters())
        self.batch_losses = []
        self.seen = {}

    def train_step(self, x, y, batch_idx):
        loss = F.cross_entropy(self.model(x), y)
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        self.batch_losses.append(loss.item())
        self.seen[batch_idx] = y.bincount(minlength=4)

    def fit(self, loader, epochs: int) -> None:
        for epoch in range(epochs):
            self.batch_losses = []
            for batch_idx, (x, y) in enumerate(loader):
                self.train_step(x, y, batch_idx)
            print(epoch, sum(self.batch_losses) / len(self.batch_losses))


if __name__ == "__main__":
    data = [(torch.randn(8, 6), torch.randint(0, 4, (8,))) for _ in range(30)]
    Trainer(nn.Linear(6, 4)).fit(data, 20)
