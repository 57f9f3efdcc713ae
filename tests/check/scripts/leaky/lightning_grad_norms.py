"""A LightningModule that logs gradient norms into a dict keyed by global step."""
import lightning as L
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class Classifier(L.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(24, 64), nn.ReLU(), nn.Linear(64, 5))
        self.grad_norms = {}

    def training_step(self, batch, batch_idx):
        x, y = batch
        return F.cross_entropy(self.net(x), y)

    def on_before_optimizer_step(self, optimizer):
        grads = [p.grad.detach().flatten() for p in self.parameters() if p.grad is not None]
        self.grad_norms[self.global_step] = torch.cat(grads).clone()

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=1e-3)


if __name__ == "__main__":
    ds = TensorDataset(torch.randn(2048, 24), torch.randint(0, 5, (2048,)))
    L.Trainer(max_epochs=3, logger=False, enable_checkpointing=False,
              accelerator="cpu").fit(Classifier(), DataLoader(ds, batch_size=32))
