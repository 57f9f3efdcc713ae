"""Concatenates one epoch's predictions; the tensor is made anew each epoch."""
import torch
import torch.nn.functional as F
from torch import nn


def main() -> None:
    model = nn.Linear(9, 3)
    optimizer = torch.optim.Adam(model.parameters())
    loader = [(torch.randn(20, 9), torch.randint(0, 3, (20,))) for _ in range(60)]
    for epoch in range(50):
        epoch_probs = torch.empty(0, 3)
        for x, y in loader:
            logits = model(x)
            loss = F.cross_entropy(logits, y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            epoch_probs = torch.cat([epoch_probs, logits.softmax(-1).detach()])
        print(epoch, epoch_probs.mean(0))


if __name__ == "__main__":
    main()
