"""Plain loop: the loss summed as a tensor keeps every step's graph."""
import torch
import torch.nn.functional as F

from _common import batches, mlp, setup


def main(steps: int = 600) -> None:
    setup()
    model = mlp()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    data = batches(batch=256)
    running_loss = 0.0
    for step in range(steps):
        x, y = data[step % len(data)]
        loss = F.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        running_loss += loss
    print("mean loss", float(running_loss) / steps)


if __name__ == "__main__":
    main()
