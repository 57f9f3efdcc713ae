"""A Hugging Face callback that records the loss every 100 steps."""
from transformers import TrainerCallback


class LossEvery100(TrainerCallback):
    def __init__(self) -> None:
        self.history = []

    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step % 100 == 0 and state.log_history:
            self.history.append(state.log_history[-1].get("loss"))
