"""Weight snapshots copied to NumPy every step and never dropped."""
import torch
import torch.nn.functional as F

from _common import batches, mlp, setup


def main(steps: int = 500) -> None:
    setup()
    model = mlp()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    data = batches()
    weight_snapshots = []
    for step in range(steps):
        x, y = data[step % len(data)]
        loss = F.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        weight_snapshots.append(model[0].weight.detach().numpy().copy())
    print("snapshots", len(weight_snapshots))


if __name__ == "__main__":
    main()
