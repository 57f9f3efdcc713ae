"""Training with an evaluation function that gathers the validation predictions."""
import torch
import torch.nn.functional as F
from torch import nn


@torch.no_grad()
def evaluate(model: nn.Module, val_loader) -> torch.Tensor:
    model.eval()
    preds = []
    for x, _y in val_loader:
        preds.append(model(x).argmax(-1))
    model.train()
    return torch.cat(preds)


def main() -> None:
    model = nn.Linear(8, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    train_loader = [(torch.randn(16, 8), torch.randint(0, 2, (16,))) for _ in range(30)]
    val_loader = train_loader[:5]
    for epoch in range(20):
        for x, y in train_loader:
            loss = F.cross_entropy(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        print(epoch, evaluate(model, val_loader).float().mean().item())


if __name__ == "__main__":
    main()
