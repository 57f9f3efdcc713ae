import lightning as L


class Lit(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.epoch_losses = []

    def training_step(self, batch, batch_idx):
        loss = self.model(batch)
        self.epoch_losses.append(loss.detach())
        return loss

    def on_train_epoch_end(self):
        self.log("epoch_loss", sum(self.epoch_losses) / len(self.epoch_losses))
        self.epoch_losses.clear()
