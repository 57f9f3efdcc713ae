"""A collate_fn that keeps every batch it builds, for a later data audit."""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

AUDIT = []


def collate(samples):
    x = torch.stack([s[0] for s in samples])
    y = torch.stack([s[1] for s in samples])
    AUDIT.append(x)
    return x, y


def main(epochs: int = 15) -> None:
    data = TensorDataset(torch.randn(4096, 20), torch.randint(0, 5, (4096,)))
    loader = DataLoader(data, batch_size=64, shuffle=True, collate_fn=collate)
    model = nn.Linear(20, 5)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(epochs):
        for x, y in loader:
            loss = nn.functional.cross_entropy(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()


if __name__ == "__main__":
    main()
