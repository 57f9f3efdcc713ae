# expect: TL202
import pytorch_lightning as pl
class CB(pl.Callback):
    def __init__(self):
        self.collected = []
    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        self.collected.append(outputs)
