from lightning.pytorch.callbacks import Callback


class LRFinderCallback(Callback):
    def __init__(self, num_training, threshold=4.0):
        self.num_training = num_training
        self.threshold = threshold
        self.losses = []
        self.best = None

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        loss = outputs["loss"].item()
        self.losses.append(loss)
        if self.best is not None and loss > self.threshold * self.best:
            trainer.should_stop = True
        self.best = loss if self.best is None else min(self.best, loss)
