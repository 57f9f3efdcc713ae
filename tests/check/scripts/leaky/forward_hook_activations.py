"""A forward hook registered once that stores every activation in a module-level list."""
import torch
import torch.nn.functional as F
from torch import nn

activations = []


def save_activation(module, inputs, output):
    activations.append(output.detach())


def main(epochs: int = 10) -> None:
    model = nn.Sequential(nn.Linear(16, 256), nn.ReLU(), nn.Linear(256, 4))
    model[1].register_forward_hook(save_activation)
    optimizer = torch.optim.Adam(model.parameters())
    loader = [(torch.randn(32, 16), torch.randint(0, 4, (32,))) for _ in range(100)]
    for epoch in range(epochs):
        for x, y in loader:
            loss = F.cross_entropy(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()


if __name__ == "__main__":
    main()
