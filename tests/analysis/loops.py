"""Small real training loops shared by the scenarios: a tiny MLP, SGD/Adam, seeded data.

Batches are made up front so a step costs well under a millisecond of Python and the
scenarios stay fast; the leaks themselves live in the test files (the "user's script").
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

IN, HIDDEN, CLASSES, BATCH = 32, 64, 10, 16


def make_model(out: int = CLASSES, seed: int = 0) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(IN, HIDDEN), nn.ReLU(), nn.Linear(HIDDEN, out))


def make_batches(n: int = 16, batch: int = BATCH, classes: int = CLASSES,
                 seed: int = 0) -> list[tuple[torch.Tensor, torch.Tensor]]:
    g = torch.Generator().manual_seed(seed)
    return [(torch.randn(batch, IN, generator=g), torch.randint(0, classes, (batch,), generator=g))
            for _ in range(n)]


def graph_nodes(grad_fn: object) -> int:
    """Distinct autograd nodes reachable from ``grad_fn`` (the truth for graph growth)."""
    seen: set[int] = set()
    keep = []
    stack = [grad_fn]
    while stack:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        keep.append(node)
        stack.extend(child for child, _ in getattr(node, "next_functions", ()))
    return len(seen)


def train_keeping_logits(steps: int, classes: int, keep: bool = True) -> None:
    """An Adam loop that keeps each step's detached logits (BATCH x ``classes`` float32)
    in ``epoch_logits`` when ``keep``; its fixed twin when not."""
    import torch.nn.functional as F

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(IN, 64), nn.ReLU(), nn.Linear(64, classes))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    batches = make_batches(classes=classes)
    epoch_logits = []
    for step in range(steps):
        x, y = batches[step % len(batches)]
        logits = model(x)
        loss = F.cross_entropy(logits, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if keep:
            epoch_logits.append(logits.detach())


def train_with_hook(on_step: Callable[[int, torch.Tensor], None], steps: int = 240) -> None:
    """A small SGD loop that calls ``on_step(step, loss)`` after each optimizer step."""
    import torch.nn.functional as F

    model = make_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    batches = make_batches()
    for step in range(steps):
        x, y = batches[step % len(batches)]
        loss = F.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        on_step(step, loss)
