"""DataLoader workers over a NumPy-backed dataset: nothing to copy on read."""
import numpy as np
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

from _common import IN, mlp, setup


class ArrayDataset(Dataset):
    def __init__(self, n: int):
        rng = np.random.default_rng(0)
        self.features = rng.standard_normal((n, IN), dtype=np.float32)
        self.labels = rng.integers(0, 10, n)

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, index):
        return torch.from_numpy(self.features[index]), int(self.labels[index])


def main() -> None:
    setup()
    loader = DataLoader(ArrayDataset(200_000), batch_size=256, shuffle=True, num_workers=2,
                        persistent_workers=True)
    model = mlp()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    for epoch in range(2):
        for step, (x, y) in enumerate(loader):
            loss = F.cross_entropy(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            if step >= 600:
                break


if __name__ == "__main__":
    main()
