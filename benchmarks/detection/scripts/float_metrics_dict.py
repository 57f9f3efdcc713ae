"""No tensor kept: a dict of Python floats grows every step."""
import torch
import torch.nn.functional as F

from _common import batches, mlp, setup


def main(steps: int = 500) -> None:
    setup()
    model = mlp()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    data = batches()
    history = {}
    for step in range(steps):
        x, y = data[step % len(data)]
        loss = F.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        value = loss.item()
        for i in range(2000):
            history[(step, i)] = value * i
    print("entries", len(history))


if __name__ == "__main__":
    main()
