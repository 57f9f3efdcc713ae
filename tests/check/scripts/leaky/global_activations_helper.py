"""A train_step helper stores activations into a module-level dict by step."""
import torch
import torch.nn.functional as F
from torch import nn

ACTIVATIONS = {}


def train_step(model: nn.Module, optimizer, x, y, step: int) -> float:
    hidden = model[1](model[0](x))
    loss = F.cross_entropy(model[2](hidden), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    ACTIVATIONS[step] = hidden.detach()
    return loss.item()


def main() -> None:
    model = nn.Sequential(nn.Linear(48, 256), nn.GELU(), nn.Linear(256, 6))
    optimizer = torch.optim.Adam(model.parameters())
    for step in range(1000):
        x, y = torch.randn(32, 48), torch.randint(0, 6, (32,))
        train_step(model, optimizer, x, y, step)


if __name__ == "__main__":
    main()
