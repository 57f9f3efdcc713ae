import lightning as L
import torch


class LitModel(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Linear(8, 1)
        self.validation_step_outputs = []

    def validation_step(self, batch, batch_idx):
        pred = self.net(batch[0])
        self.validation_step_outputs.append(pred)

    def on_validation_epoch_end(self):
        preds = torch.cat(self.validation_step_outputs)
        self.log("val_mean", preds.mean())
        self.validation_step_outputs.clear()
