"""Healthy for half the run, then a debug cache starts keeping hidden states."""
import torch
import torch.nn.functional as F

from _common import batches, mlp, setup


def main(steps: int = 800) -> None:
    setup()
    model = mlp()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    data = batches(batch=128)
    debug_cache = {}
    for step in range(steps):
        x, y = data[step % len(data)]
        hidden = model[1](model[0](x))
        loss = F.cross_entropy(model[2](hidden), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step >= steps // 2:
            debug_cache[step] = hidden.detach().clone()
    print("cached", len(debug_cache))


if __name__ == "__main__":
    main()
