"""A cache that fills during the first epoch and then only hits: a plateau, not a leak."""
import torch
import torch.nn.functional as F

from _common import batches, mlp, setup


def main(steps: int = 600) -> None:
    setup()
    model = mlp()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    data = batches(n=64)
    feature_cache = {}
    for step in range(steps):
        index = step % len(data)
        if index not in feature_cache:
            x, y = data[index]
            feature_cache[index] = (x * 2.0, y)
        x, y = feature_cache[index]
        loss = F.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


if __name__ == "__main__":
    main()
