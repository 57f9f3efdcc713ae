# expect: TL102 TL202
import lightning as L
import torch


class LitClassifier(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.layer = torch.nn.Linear(32, 4)
        self.train_losses = []

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = torch.nn.functional.cross_entropy(self.layer(x), y)
        self.train_losses.append(loss)
        return loss

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters())
