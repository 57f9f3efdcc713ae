# expect: TL302
import torch


def train(model, loader, optimizer):
    for batch in loader:
        loss = model(batch)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        torch.cuda.empty_cache()
