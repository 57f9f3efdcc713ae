# expect: TL102 TL202
from transformers import Trainer
class T(Trainer):
    def __init__(self, *a, **k):
        super().__init__(*a, **k)
        self.eval_logits = []
    def prediction_step(self, model, inputs, prediction_loss_only, ignore_keys=None):
        outputs = model(**inputs)
        self.eval_logits.append(outputs.logits)
        return (outputs.loss, outputs.logits, inputs["labels"])
