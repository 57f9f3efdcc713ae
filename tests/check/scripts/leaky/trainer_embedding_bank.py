"""A trainer that builds an embedding bank by concatenating onto an attribute."""
import torch
from torch import nn


class ContrastiveTrainer:
    def __init__(self, encoder: nn.Module) -> None:
        self.encoder = encoder
        self.optimizer = torch.optim.SGD(encoder.parameters(), lr=0.03, momentum=0.9)
        self.bank = None

    def fit(self, loader, epochs: int) -> None:
        for epoch in range(epochs):
            for x1, x2 in loader:
                z1, z2 = self.encoder(x1), self.encoder(x2)
                loss = -nn.functional.cosine_similarity(z1, z2).mean()
                self.optimizer.zero_grad()
                loss.backward()
                self.optimizer.step()
                if self.bank is None:
                    self.bank = z1.detach()
                else:
                    self.bank = torch.cat([self.bank, z1.detach()])


if __name__ == "__main__":
    pairs = [(torch.randn(32, 20), torch.randn(32, 20)) for _ in range(50)]
    ContrastiveTrainer(nn.Linear(20, 64)).fit(pairs, epochs=30)
