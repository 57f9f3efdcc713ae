import torch


class Runner:
    @staticmethod
    @torch.no_grad()
    def evaluate(model, val_loader):
        model.eval()
        for x, y in val_loader:
            model(x)


@torch.no_grad()
def validate(model, val_loader):
    for x, y in val_loader:
        model(x)
