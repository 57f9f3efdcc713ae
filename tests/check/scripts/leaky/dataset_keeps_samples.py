"""A Dataset that keeps every augmented sample it ever produced."""
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset


class NoisyImages(Dataset):
    def __init__(self, n: int) -> None:
        self.n = n
        self.produced = []

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, index: int):
        image = torch.randn(3, 32, 32) + 0.1 * torch.randn(3, 32, 32)
        self.produced.append(image)
        return image, index % 10


def main(epochs: int = 20) -> None:
    model = nn.Sequential(nn.Conv2d(3, 8, 3), nn.Flatten(), nn.LazyLinear(10))
    optimizer = torch.optim.Adam(model.parameters())
    loader = DataLoader(NoisyImages(2048), batch_size=64, shuffle=True)
    for epoch in range(epochs):
        for x, y in loader:
            loss = nn.functional.cross_entropy(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()


if __name__ == "__main__":
    main()
