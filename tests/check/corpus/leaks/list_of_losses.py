# expect: TL102
import torch


def fit(model, loader, optimizer):
    history = []
    for step, (x, y) in enumerate(loader):
        loss = torch.nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        history.append(loss)
    return history
