"""Writes a log line per step to a file; the epoch summary string is made anew."""
import torch
from torch import nn


def train(epochs: int = 10) -> None:
    model = nn.Linear(5, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    data = [(torch.randn(32, 5), torch.randn(32, 1)) for _ in range(100)]
    with open("train.log", "w") as fh:
        for epoch in range(epochs):
            summary = ""
            for step, (x, y) in enumerate(data):
                loss = nn.functional.mse_loss(model(x), y)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                line = f"{epoch}:{step} {loss.item():.4f}\n"
                fh.write(line)
                if step % 25 == 0:
                    summary += line
            print(summary)


if __name__ == "__main__":
    train()
