# expect: TL110
import warnings

import torch


def train(model, optimizer, loader, max_norm=1.0):
    for step, (x, y) in enumerate(loader):
        loss = torch.nn.functional.mse_loss(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
        if norm > 10 * max_norm:
            warnings.warn("gradient norm %.2f clipped at step %d" % (norm, step))
        optimizer.step()
