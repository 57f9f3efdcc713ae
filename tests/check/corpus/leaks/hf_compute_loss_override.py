# expect: TL102 TL202
from transformers import Trainer


class LoggingTrainer(Trainer):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.step_losses = []

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        out = model(**inputs)
        self.step_losses.append(out.loss)
        return (out.loss, out) if return_outputs else out.loss
