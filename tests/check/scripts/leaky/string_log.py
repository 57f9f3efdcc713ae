"""Builds the training log as one string in memory."""
import torch
from torch import nn

log_text = ""


def run(steps: int = 5000) -> None:
    global log_text
    model = nn.Linear(10, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    for step in range(steps):
        x, y = torch.randn(32, 10), torch.randn(32, 1)
        loss = ((model(x) - y) ** 2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        log_text += f"step={step} loss={loss.item():.6f} lr={optimizer.param_groups[0]['lr']}\n"
    with open("train.log", "w") as fh:
        fh.write(log_text)


if __name__ == "__main__":
    run()
