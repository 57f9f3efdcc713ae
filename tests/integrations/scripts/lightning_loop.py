"""A tiny Lightning run: healthy, or leaking (every step's loss kept with its graph).

python lightning_loop.py [--leak] [--callback] [--logs DIR] [--report FILE] [--out DIR]
"""

from __future__ import annotations

import argparse
import sys

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

import lightning.pytorch as pl


class LitModel(pl.LightningModule):
    def __init__(self, leak: bool) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 4))
        self.leak = leak
        self.training_step_outputs: list[torch.Tensor] = []
        self.validation_step_outputs: list[torch.Tensor] = []

    def training_step(self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int) -> torch.Tensor:
        x, y = batch
        loss = nn.functional.cross_entropy(self.net(x), y)
        self.training_step_outputs.append(loss if self.leak else loss.detach())
        return loss

    def on_train_epoch_end(self) -> None:
        if not self.leak:
            self.training_step_outputs.clear()

    def validation_step(self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int) -> None:
        x, y = batch
        self.validation_step_outputs.append(nn.functional.cross_entropy(self.net(x), y))

    def on_validation_epoch_end(self) -> None:
        self.validation_step_outputs.clear()

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.01)


def data(n: int) -> DataLoader:
    g = torch.Generator().manual_seed(n)
    return DataLoader(TensorDataset(torch.randn(n, 32, generator=g),
                                    torch.randint(0, 4, (n,), generator=g)), batch_size=32)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--leak", action="store_true")
    parser.add_argument("--callback", action="store_true")
    parser.add_argument("--logs", default="logs")
    parser.add_argument("--report", default=None)
    parser.add_argument("--out", default=None)
    parser.add_argument("--guard", action="store_true", help="guard=stop under a 1 MiB limit")
    args = parser.parse_args()
    torch.manual_seed(0)
    callbacks = []
    if args.callback:
        from torchleak.lightning import TorchleakCallback

        guard = {"guard": "stop", "limit": "1MiB"} if args.guard else {}
        callback = TorchleakCallback(out=args.out, **guard)
        callbacks.append(callback)
    trainer = pl.Trainer(max_epochs=2, accelerator="cpu", logger=pl.loggers.CSVLogger(args.logs),
                         enable_progress_bar=False, enable_model_summary=False,
                         enable_checkpointing=False, callbacks=callbacks, log_every_n_steps=5,
                         num_sanity_val_steps=0)
    trainer.fit(LitModel(args.leak), data(960), data(64))
    if args.report and args.callback and callback.report is not None:
        with open(args.report, "w") as out:
            out.write(callback.report.to_json())
    sys.stdout.write(f"fit done at step {trainer.global_step}\n")


if __name__ == "__main__":
    main()
