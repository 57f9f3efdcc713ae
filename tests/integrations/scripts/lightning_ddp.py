"""Lightning DDP on 2 CPU processes with the callback; rank 1 alone keeps its losses.

python lightning_ddp.py  (run folder under $TORCHLEAK_RUNS_DIR, shared by both ranks)
"""

from __future__ import annotations

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

import lightning.pytorch as pl
from torchleak.lightning import TorchleakCallback


class RankModel(pl.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Linear(32, 4)
        self.kept: list[torch.Tensor] = []

    def training_step(self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int) -> torch.Tensor:
        x, y = batch
        loss = nn.functional.cross_entropy(self.net(x), y)
        if self.global_rank == 1:
            self.kept.append(loss)
        return loss

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.01)


if __name__ == "__main__":
    g = torch.Generator().manual_seed(0)
    data = TensorDataset(torch.randn(1280, 32, generator=g), torch.randint(0, 4, (1280,), generator=g))
    trainer = pl.Trainer(max_epochs=1, accelerator="cpu", devices=2, strategy="ddp", logger=False,
                         enable_progress_bar=False, enable_model_summary=False,
                         enable_checkpointing=False, callbacks=[TorchleakCallback()])
    trainer.fit(RankModel(), DataLoader(data, batch_size=16))
