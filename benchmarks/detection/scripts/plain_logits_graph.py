"""Plain loop: logits kept in a list with their autograd graph."""
import torch.nn.functional as F
import torch

from _common import batches, mlp, setup


def main(steps: int = 500) -> None:
    setup()
    model = mlp(256)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    data = batches(classes=256)
    epoch_logits = []
    for step in range(steps):
        x, y = data[step % len(data)]
        logits = model(x)
        loss = F.cross_entropy(logits, y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        epoch_logits.append(logits)
    print("done", len(epoch_logits))


if __name__ == "__main__":
    main()
