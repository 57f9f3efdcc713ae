"""Features computed once per batch index and reused every epoch (bounded by the data)."""
import torch
import torch.nn.functional as F
from torch import nn

frozen = nn.Sequential(nn.Linear(64, 128), nn.ReLU()).requires_grad_(False)
head = nn.Linear(128, 10)
optimizer = torch.optim.Adam(head.parameters(), lr=1e-3)
loader = [(torch.randn(32, 64), torch.randint(0, 10, (32,))) for _ in range(40)]
feature_cache = {}

for epoch in range(100):
    for i, (x, y) in enumerate(loader):
        if i not in feature_cache:
            feature_cache[i] = frozen(x)
        loss = F.cross_entropy(head(feature_cache[i]), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
