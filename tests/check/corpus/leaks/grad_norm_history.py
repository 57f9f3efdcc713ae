# expect: TL202
import torch


class Trainer:
    def __init__(self, model, optimizer):
        self.model = model
        self.optimizer = optimizer
        self.grad_norm_history = []

    def train_epoch(self, loader):
        for batch in loader:
            loss = self.model(batch).mean()
            self.optimizer.zero_grad()
            loss.backward()
            norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
            self.grad_norm_history.append(float(norm))
            self.optimizer.step()
