"""A bounded window of recent logits: grows to its bound, then stays."""
import collections

import torch
import torch.nn.functional as F

from _common import batches, mlp, setup


def main(steps: int = 600) -> None:
    setup()
    model = mlp(512)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    data = batches(classes=512)
    recent_logits = collections.deque(maxlen=50)
    for step in range(steps):
        x, y = data[step % len(data)]
        logits = model(x)
        loss = F.cross_entropy(logits, y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        recent_logits.append(logits.detach())


if __name__ == "__main__":
    main()
