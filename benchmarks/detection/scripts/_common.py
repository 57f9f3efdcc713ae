"""Shared by the scripts: a tiny MLP, seeded batches made up front, one compute thread."""

from __future__ import annotations

import torch
from torch import nn

IN, HIDDEN, CLASSES, BATCH = 64, 128, 10, 32


def setup(seed: int = 0) -> None:
    torch.manual_seed(seed)
    torch.set_num_threads(1)


def mlp(out: int = CLASSES) -> nn.Module:
    return nn.Sequential(nn.Linear(IN, HIDDEN), nn.ReLU(), nn.Linear(HIDDEN, out))


def batches(n: int = 32, classes: int = CLASSES, batch: int = BATCH) -> list[tuple[torch.Tensor, torch.Tensor]]:
    g = torch.Generator().manual_seed(0)
    return [(torch.randn(batch, IN, generator=g), torch.randint(0, classes, (batch,), generator=g))
            for _ in range(n)]
