"""A small trainer with callbacks; the outputs callback clears its list every epoch."""
import torch
from torch import nn


class Callback:
    def on_batch_end(self, trainer, outputs):
        pass

    def on_epoch_end(self, trainer):
        pass


class OutputsCallback(Callback):
    def __init__(self) -> None:
        self.outputs = []
        self.epoch_std = []

    def on_batch_end(self, trainer, outputs):
        self.outputs.append(outputs["logits"].detach())

    def on_epoch_end(self, trainer):
        self.epoch_std.append(torch.cat(self.outputs).std().item())
        self.outputs.clear()


class MiniTrainer:
    def __init__(self, model: nn.Module, callbacks: list) -> None:
        self.model = model
        self.callbacks = callbacks
        self.optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

    def fit(self, loader, epochs: int) -> None:
        for epoch in range(epochs):
            for x, y in loader:
                out = self.model(x)
                loss = nn.functional.cross_entropy(out, y)
                self.optimizer.zero_grad()
                loss.backward()
                self.optimizer.step()
                for cb in self.callbacks:
                    cb.on_batch_end(self, {"logits": out})
            for cb in self.callbacks:
                cb.on_epoch_end(self)


if __name__ == "__main__":
    data = [(torch.randn(16, 8), torch.randint(0, 3, (16,))) for _ in range(25)]
    MiniTrainer(nn.Linear(8, 3), [OutputsCallback()]).fit(data, epochs=40)
