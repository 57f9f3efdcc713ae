import torch


@torch.no_grad()
def evaluate(model, val_loader):
    model.eval()
    outputs = []
    for x, y in val_loader:
        outputs.append(model(x))
    return torch.cat(outputs)
