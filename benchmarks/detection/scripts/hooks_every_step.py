"""A forward hook registered inside the loop: one more hook, and its captured input, per step."""
import torch
import torch.nn.functional as F

from _common import batches, mlp, setup


def main(steps: int = 500) -> None:
    setup()
    model = mlp()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    data = batches(batch=256)
    for step in range(steps):
        x, y = data[step % len(data)]
        reference = x.clone()

        def save_activation(module, inputs, output, reference=reference):
            return None

        model.register_forward_hook(save_activation)
        loss = F.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


if __name__ == "__main__":
    main()
