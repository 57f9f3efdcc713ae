from collections import deque


class Monitor:
    def __init__(self):
        self.grad_norms = deque(maxlen=100)

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        self.grad_norms.append(float(outputs["loss"]))
