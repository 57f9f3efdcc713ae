"""The loop calls a train_step helper and keeps every step's detached outputs."""
import torch
import torch.nn.functional as F
from torch import nn


def train_step(model: nn.Module, optimizer, x: torch.Tensor, y: torch.Tensor):
    out = model(x)
    loss = F.cross_entropy(out, y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss, out


def main(total_steps: int = 3000) -> None:
    model = nn.Sequential(nn.Linear(32, 128), nn.ReLU(), nn.Linear(128, 8))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    outputs = []
    for step in range(total_steps):
        x, y = torch.randn(64, 32), torch.randint(0, 8, (64,))
        loss, out = train_step(model, optimizer, x, y)
        outputs.append(out.detach())
        if step % 500 == 0:
            print(step, loss.item())


if __name__ == "__main__":
    main()
