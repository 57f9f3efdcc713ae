# expect: TL103
import lightning.pytorch as pl
import torch


class LitForecast(pl.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Linear(8, 1)
        self.validation_step_outputs = []

    def validation_step(self, batch, batch_idx):
        x, y = batch
        self.validation_step_outputs.append({"pred": self.net(x).cpu(), "y": y.cpu()})

    def on_validation_epoch_end(self):
        preds = torch.cat([o["pred"] for o in self.validation_step_outputs])
        self.log("val_mean", preds.mean())
