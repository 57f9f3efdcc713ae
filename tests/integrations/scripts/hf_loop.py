"""A tiny Hugging Face Trainer run on a 2-layer GPT-2 built from a random config (nothing
downloaded): healthy, or leaking (a Trainer subclass keeps a tensor every step).

python hf_loop.py [--leak] [--callback] [--history FILE] [--report FILE] [--out DIR]
"""

from __future__ import annotations

import argparse
import json

import torch
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments


class Tokens(torch.utils.data.Dataset):
    def __len__(self) -> int:
        return 192

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        ids = torch.randint(0, 128, (16,), generator=torch.Generator().manual_seed(i))
        return {"input_ids": ids, "labels": ids}


class KeepingTrainer(Trainer):
    """Keeps a 16 KiB tensor per step when asked to leak."""

    def __init__(self, *args: object, leak: bool = False, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)
        self.leak = leak
        self.step_tensors: list[torch.Tensor] = []

    def training_step(self, model, inputs, num_items_in_batch=None):  # type: ignore[no-untyped-def]
        loss = super().training_step(model, inputs, num_items_in_batch)
        if self.leak:
            self.step_tensors.append(torch.randn(4096))
        return loss


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--leak", action="store_true")
    parser.add_argument("--callback", action="store_true")
    parser.add_argument("--history", default=None)
    parser.add_argument("--report", default=None)
    parser.add_argument("--out", default=None)
    parser.add_argument("--guard", action="store_true", help="guard=stop under a 1 MiB limit")
    args = parser.parse_args()
    torch.manual_seed(0)
    config = GPT2Config(vocab_size=128, n_positions=32, n_embd=32, n_layer=2, n_head=2,
                        bos_token_id=0, eos_token_id=0)
    callbacks = []
    if args.callback:
        from torchleak.transformers import TorchleakCallback

        guard = {"guard": "stop", "limit": "1MiB"} if args.guard else {}
        callback = TorchleakCallback(out=args.out, **guard)
        callbacks.append(callback)
    training = TrainingArguments(output_dir="hf-out", per_device_train_batch_size=4,
                                 num_train_epochs=1, logging_steps=4, report_to=["tensorboard"],
                                 save_strategy="no",
                                 disable_tqdm=True, use_cpu=True)
    trainer = KeepingTrainer(model=GPT2LMHeadModel(config), args=training,
                             train_dataset=Tokens(), callbacks=callbacks, leak=args.leak)
    trainer.train()
    print(f"train done at step {trainer.state.global_step}", flush=True)
    if args.history:
        with open(args.history, "w") as out:
            json.dump(trainer.state.log_history, out)
    if args.report and args.callback and callback.report is not None:
        with open(args.report, "w") as out:
            out.write(callback.report.to_json())


if __name__ == "__main__":
    main()
