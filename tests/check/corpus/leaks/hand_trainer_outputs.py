# expect: TL102
import torch


class Trainer:
    def __init__(self, model, opt):
        self.model, self.opt = model, opt
        self.train_outputs = []

    def step(self, x, y):
        logits = self.model(x)
        loss = torch.nn.functional.cross_entropy(logits, y)
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()
        self.train_outputs.append(logits)
        return loss.item()

    def fit(self, loader):
        for x, y in loader:
            self.step(x, y)
