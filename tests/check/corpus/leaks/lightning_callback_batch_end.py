# expect: TL202
from lightning.pytorch.callbacks import Callback


class LossHistory(Callback):
    def __init__(self):
        super().__init__()
        self.batch_losses = []

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        self.batch_losses.append(outputs["loss"])
