# expect: TL303
import torch.nn as nn


def train(model, loader, optimizer):
    for x, y in loader:
        criterion = nn.CrossEntropyLoss()
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
