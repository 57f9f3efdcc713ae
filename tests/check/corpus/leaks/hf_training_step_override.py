# expect: TL102 TL107
from transformers import Trainer


class RecordingTrainer(Trainer):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.raw_losses = {}

    def training_step(self, model, inputs, num_items_in_batch=None):
        loss = super().training_step(model, inputs, num_items_in_batch)
        self.raw_losses[self.state.global_step] = self.compute_loss(model, inputs)
        return loss
