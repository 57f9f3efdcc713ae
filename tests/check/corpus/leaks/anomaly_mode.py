# expect: TL106
import torch

torch.autograd.set_detect_anomaly(True)


def train(model, loader, opt):
    for x in loader:
        opt.zero_grad()
        model(x).sum().backward()
        opt.step()
