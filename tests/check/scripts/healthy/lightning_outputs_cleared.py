"""A LightningModule that collects training outputs and clears them every epoch."""
import lightning as L
import torch
import torch.nn.functional as F
from torch import nn


class Model(L.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Linear(10, 4)
        self.training_step_outputs = []

    def training_step(self, batch, batch_idx):
        x, y = batch
        logits = self.net(x)
        self.training_step_outputs.append(logits.detach())
        return F.cross_entropy(logits, y)

    def on_train_epoch_end(self):
        all_logits = torch.cat(self.training_step_outputs)
        self.log("logit_std", all_logits.std())
        self.training_step_outputs.clear()

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters())
