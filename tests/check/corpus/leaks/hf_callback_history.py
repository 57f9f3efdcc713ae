# expect: TL202
from transformers import TrainerCallback


class GradNormCallback(TrainerCallback):
    def __init__(self):
        self.grad_norms = []

    def on_step_end(self, args, state, control, model=None, **kwargs):
        total = 0.0
        for p in model.parameters():
            if p.grad is not None:
                total += float(p.grad.norm())
        self.grad_norms.append(total)
