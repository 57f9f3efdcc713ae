"""A Dataset that renders each sample once and keeps it: the first epoch fills the memo."""
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)
torch.set_num_threads(1)


class RenderedShapes(Dataset):
    def __init__(self, n: int = 2400) -> None:
        self.n = n
        self.memo: dict[int, tuple[torch.Tensor, int]] = {}

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int):
        if i not in self.memo:
            g = torch.Generator().manual_seed(i)
            image = torch.rand(3, 64, 64, generator=g) * 0.5 + 0.25
            self.memo[i] = (image, i % 10)
        return self.memo[i]


model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(3 * 64 * 64, 64), torch.nn.ReLU(),
                            torch.nn.Linear(64, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
loader = DataLoader(RenderedShapes(), batch_size=24, shuffle=True)
for epoch in range(4):
    for x, y in loader:
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
print("done")
