"""A small training loop with two classic leaks, to try torchleak on.

    torchleak run examples/leaky_training.py

1. ``epoch_logits.append(logits)`` keeps every step's logits *and their autograd
   graph* alive (the list is never cleared).
2. ``running_loss += loss`` sums tensors, so every step's graph stays reachable.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Classifier(nn.Module):
    def __init__(self, features: int = 64, classes: int = 10) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(features, 256), nn.ReLU(), nn.Linear(256, classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


def main(steps: int = 300) -> None:
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = Classifier()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    epoch_logits = []
    running_loss = 0.0
    for step in range(1, steps + 1):
        x = torch.randn(128, 64)
        y = torch.randint(0, 10, (128,))
        logits = model(x)
        loss = F.cross_entropy(logits, y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        epoch_logits.append(logits)
        running_loss += loss
        if step % 100 == 0:
            print(f"step {step} mean loss {running_loss.item() / step:.4f}")


if __name__ == "__main__":
    main()
