"""Lightning: training-step outputs collected on the module and never cleared."""
import lightning as L
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

from _common import IN, mlp, setup


class Model(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = mlp(512)
        self.train_outputs = []

    def training_step(self, batch, batch_idx):
        x, y = batch
        logits = self.net(x)
        self.train_outputs.append(logits.detach())
        return F.cross_entropy(logits, y)

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=1e-3)


def main() -> None:
    setup()
    data = TensorDataset(torch.randn(32 * 50, IN), torch.randint(0, 512, (32 * 50,)))
    trainer = L.Trainer(max_epochs=5, logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False,
                        accelerator="cpu", devices=1)
    trainer.fit(Model(), DataLoader(data, batch_size=32))


if __name__ == "__main__":
    main()
