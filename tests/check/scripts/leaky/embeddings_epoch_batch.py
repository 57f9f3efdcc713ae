"""Keeps embeddings under (epoch, batch) keys for a later analysis."""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def main() -> None:
    encoder = nn.Sequential(nn.Linear(40, 128), nn.ReLU())
    head = nn.Linear(128, 4)
    params = list(encoder.parameters()) + list(head.parameters())
    optimizer = torch.optim.SGD(params, lr=0.05)
    loader = DataLoader(TensorDataset(torch.randn(1024, 40), torch.randint(0, 4, (1024,))),
                        batch_size=32, shuffle=True)
    embeddings = {}
    for epoch in range(25):
        for i, (x, y) in enumerate(loader):
            emb = encoder(x)
            loss = F.cross_entropy(head(emb), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            embeddings[(epoch, i)] = emb.detach().cpu()


if __name__ == "__main__":
    main()
