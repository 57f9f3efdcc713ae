"""Healthy plain loop: numbers, not tensors, are kept; the epoch list is reset."""
import torch
import torch.nn.functional as F

from _common import batches, mlp, setup


def main(steps: int = 600) -> None:
    setup()
    model = mlp(256)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    data = batches(classes=256)
    epoch_losses = []
    for step in range(steps):
        x, y = data[step % len(data)]
        loss = F.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        epoch_losses.append(loss.item())
        if step % 100 == 99:
            print("epoch loss", sum(epoch_losses) / len(epoch_losses))
            epoch_losses = []


if __name__ == "__main__":
    main()
