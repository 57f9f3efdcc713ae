from transformers import TrainerCallback


class SampleLogger(TrainerCallback):
    def __init__(self, every=500):
        self.every = every
        self.table = []

    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step % self.every != 0:
            return
        self.table.append((state.global_step, state.log_history[-1]))
