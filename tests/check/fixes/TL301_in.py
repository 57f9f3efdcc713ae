import torch


class Runner:
    @staticmethod
    def evaluate(model, val_loader):
        model.eval()
        for x, y in val_loader:
            model(x)


def validate(model, val_loader):
    for x, y in val_loader:
        model(x)
