"""A Hugging Face Trainer subclass that concatenates every batch's logits onto itself."""
import torch
from transformers import Trainer


class LogitKeepingTrainer(Trainer):
    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.all_logits = torch.empty(0)

    def compute_loss(self, model, inputs, return_outputs=False, **kwargs):
        outputs = model(**inputs)
        self.all_logits = torch.cat([self.all_logits, outputs.logits.detach().cpu()])
        return (outputs.loss, outputs) if return_outputs else outputs.loss
