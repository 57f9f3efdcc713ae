"""MoCo-style contrastive training in Lightning with a queue of negative keys."""
import lightning as L
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset


class MoCoSystem(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.encoder = torch.nn.Linear(128, 64)
        self.queue = torch.randn(0, 64)

    def training_step(self, batch, batch_idx):
        (x,) = batch
        q = F.normalize(self.encoder(x), dim=1)
        with torch.no_grad():
            k = F.normalize(self.encoder(x + 0.1 * torch.randn_like(x)), dim=1)
        logits = q @ torch.cat([k, self.queue]).T
        self.queue = torch.cat([self.queue, k.detach()])
        return F.cross_entropy(logits / 0.07, torch.arange(len(x)))

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)


torch.manual_seed(0)
torch.set_num_threads(1)
data = DataLoader(TensorDataset(torch.randn(64 * 60, 128)), batch_size=64)
trainer = L.Trainer(max_epochs=5, logger=False, enable_checkpointing=False,
                    enable_progress_bar=False, enable_model_summary=False, accelerator="cpu")
trainer.fit(MoCoSystem(), data)
print("done")
