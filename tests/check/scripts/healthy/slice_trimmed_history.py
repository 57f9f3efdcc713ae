"""A history trimmed to its last 1000 entries by slicing."""
import torch
from torch import nn

net = nn.Sequential(nn.Linear(3, 16), nn.ReLU(), nn.Linear(16, 1))
optimizer = torch.optim.Adam(net.parameters())
history = []


def step_once(step: int) -> None:
    global history
    x, y = torch.randn(32, 3), torch.randn(32, 1)
    loss = nn.functional.mse_loss(net(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    history.append((step, loss.item()))
    history = history[-1000:]


if __name__ == "__main__":
    for step in range(100_000):
        step_once(step)
