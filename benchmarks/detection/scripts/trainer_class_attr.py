"""A hand-written Trainer class keeps every step's outputs on an attribute."""
import torch
import torch.nn.functional as F

from _common import batches, mlp, setup


class Trainer:
    def __init__(self, model, optimizer):
        self.model = model
        self.optimizer = optimizer
        self.step_outputs = []

    def training_step(self, x, y):
        logits = self.model(x)
        loss = F.cross_entropy(logits, y)
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        self.step_outputs.append({"loss": loss.detach(), "logits": logits.detach()})

    def fit(self, data, steps):
        for step in range(steps):
            self.training_step(*data[step % len(data)])


def main(steps: int = 500) -> None:
    setup()
    model = mlp(512)
    trainer = Trainer(model, torch.optim.Adam(model.parameters(), lr=1e-3))
    trainer.fit(batches(classes=512), steps)
    print("outputs", len(trainer.step_outputs))


if __name__ == "__main__":
    main()
