"""A Lightning callback that keeps every batch's loss tensor."""
import lightning as L
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class LossRecorder(L.Callback):
    def __init__(self) -> None:
        self.batch_losses = []

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        self.batch_losses.append(outputs["loss"].detach())


class Regressor(L.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 1))

    def training_step(self, batch, batch_idx):
        x, y = batch
        return F.mse_loss(self.net(x).squeeze(-1), y)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)


if __name__ == "__main__":
    ds = TensorDataset(torch.randn(4096, 8), torch.randn(4096))
    L.Trainer(max_epochs=5, logger=False, callbacks=[LossRecorder()],
              accelerator="cpu").fit(Regressor(), DataLoader(ds, batch_size=64))
