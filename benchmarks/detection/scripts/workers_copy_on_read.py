"""DataLoader workers read a big list of Python objects: copy-on-read grows their memory."""
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

from _common import IN, mlp, setup


class TokenDataset(Dataset):
    def __init__(self, n: int):
        self.samples = [(i * 7919 % 100_003, float(i)) for i in range(n)]

    def __len__(self):
        return len(self.samples)

    def __getitem__(self, index):
        token, weight = self.samples[index]
        return torch.full((IN,), weight / 1e6), token % 10


def main() -> None:
    setup()
    dataset = TokenDataset(600_000)
    loader = DataLoader(dataset, batch_size=256, shuffle=True, num_workers=2,
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
