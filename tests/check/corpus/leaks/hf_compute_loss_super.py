# expect: TL102 TL202
from transformers import Trainer


class DistillTrainer(Trainer):
    teacher_logits = []

    def compute_loss(self, model, inputs, return_outputs=False, **kwargs):
        loss, outputs = super().compute_loss(model, inputs, return_outputs=True, **kwargs)
        self.teacher_logits.append(outputs.logits)
        return (loss, outputs) if return_outputs else loss
