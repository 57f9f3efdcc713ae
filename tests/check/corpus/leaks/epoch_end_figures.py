# expect: TL104
import matplotlib.pyplot as plt
import pytorch_lightning as pl


class PlotsOnEpochEnd(pl.LightningModule):
    def on_validation_epoch_end(self):
        preds, targets = self.collect()
        for i, name in enumerate(["x", "y", "z"]):
            plt.figure(figsize=(8, 8))
            plt.scatter(preds[:, i], targets[:, i])
            plt.savefig(f"{name}_{self.current_epoch}.png")
