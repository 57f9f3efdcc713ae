# expect: TL102 TL202
import torch
class Trainer:
    def __init__(self, model, opt, loader):
        self.model, self.opt, self.loader = model, opt, loader
        self.losses = []
    def train_step(self, batch):
        loss = self.model(batch).mean()
        self.opt.zero_grad(); loss.backward(); self.opt.step()
        return loss
    def fit(self):
        for batch in self.loader:
            loss = self.train_step(batch)
            self.losses.append(loss)
