"""A bounded window of recent logits for a moving statistic."""
from collections import deque

import torch
import torch.nn.functional as F
from torch import nn

recent = deque(maxlen=100)


def main(steps: int = 2000) -> None:
    model = nn.Linear(20, 5)
    optimizer = torch.optim.Adam(model.parameters())
    for step in range(steps):
        x, y = torch.randn(64, 20), torch.randint(0, 5, (64,))
        logits = model(x)
        loss = F.cross_entropy(logits, y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        recent.append(logits.detach())
        if step % 200 == 0:
            print(torch.cat(list(recent)).std().item())


if __name__ == "__main__":
    main()
