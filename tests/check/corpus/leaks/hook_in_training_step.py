# expect: TL105
import lightning as L


class Probe(L.LightningModule):
    def training_step(self, batch, batch_idx):
        stats = []
        self.backbone.layer4.register_forward_hook(lambda m, i, o: stats.append(o.mean()))
        loss = self.backbone(batch).sum()
        return loss
