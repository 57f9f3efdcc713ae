"""Hugging Face: ``Trainer(..., callbacks=[TorchleakCallback()])`` records the run with the
one engine ``torchleak run`` uses (same trace, live warnings, guard and final report).

- phases: an ``epoch`` mark at each ``on_epoch_end``, an ``evaluate`` mark at each
  ``on_evaluate`` (the evaluation itself is a validation phase: the model's ``eval()``);
- the memory scalars (``torchleak/main_rss_mib``, workers, CUDA, tensors, live leaks) join
  the Trainer's own log entries, so every ``report_to`` integration (TensorBoard, W&B,
  MLflow, ...) and ``trainer.state.log_history`` receive them at the Trainer's
  ``logging_steps`` (or every ``log_every_n_steps`` steps when given);
- the guard (``guard="checkpoint"|"stop"``) asks for a save through
  ``control.should_save`` and stops through ``control.should_training_stop``; under
  several processes every rank decides together;
- under several processes every rank records its own trace in one shared run folder and
  the main process prints the summary of all ranks.
"""

from __future__ import annotations

import sys
from typing import Any

from transformers import TrainerCallback

from torchleak.check.crossref import annotate
from torchleak.live.attach import FrameworkRun


class TorchleakCallback(TrainerCallback):  # type: ignore[misc]
    """Record, watch and guard a Hugging Face ``Trainer`` run.

    Options are those of ``torchleak.monitor()`` (out, name, budget, limit, guard,
    guard_share, guard_minutes, quiet, warnings).
    """

    def __init__(self, log_every_n_steps: int | None = None, **options: Any) -> None:
        self.log_every_n_steps = log_every_n_steps if isinstance(
            log_every_n_steps, int) and log_every_n_steps > 0 else None
        self._run = FrameworkRun({"annotate": annotate, **options}, "TorchleakCallback")
        self.report: Any = None  # the Report of the latest run (None on ranks > 0)

    @property
    def monitor(self) -> Any:
        return self._run.monitor

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self._run.active:
            return
        _run_first(self)
        model = kwargs.get("model")
        name = type(model).__name__ if model is not None else "Trainer"
        world = int(getattr(args, "world_size", 1) or 1)
        self._run.start(name, int(getattr(args, "process_index", 0) or 0), world,
                        broadcast=_broadcast)
        self._run.set_stopper(lambda: None)  # the stop goes through the control object

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        report = self._run.stop(barrier=_barrier)
        if report is not None:
            self.report = report
            state.log_history.append({"torchleak/verdict_leak": float(report.verdict == "leak"),
                                      "torchleak/serious_findings": float(len(report.serious)),
                                      "step": state.global_step})

    def on_epoch_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._run.mark("epoch", round(state.epoch or 0))

    def on_evaluate(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        metrics = kwargs.get("metrics") or {}
        self._run.mark("evaluate", metrics.get("eval_loss"))

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if not self._run.active:
            return
        every = self.log_every_n_steps
        if every is not None and state.global_step % every == 0:
            control.should_log = True
        event = self._run.guard_action()
        fired = _any_rank(event is not None, self._run.world)
        if fired:
            control.should_save = True
            mode = event.mode if event is not None else self._run.monitor.options.guard
            if mode == "stop":
                control.should_training_stop = True
            self._run.event("guard", f"asked the Trainer to save"
                            f"{' and stop' if mode == 'stop' else ''} at step {state.global_step}")

    def on_log(self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None,
               **kwargs: Any) -> None:
        """Our scalars join the entry being logged (we run first: the integrations after
        us see them) and the Trainer's log history."""
        metrics = self._run.metrics() if self._run.active else {}
        if logs is None or not metrics:
            return
        logs.update(metrics)
        history = getattr(state, "log_history", None)
        if history and isinstance(history[-1], dict):
            history[-1].update(metrics)


def _run_first(callback: Any) -> None:
    """Put the callback first in its Trainer's list so the reporting integrations (added
    before the user's callbacks) see the scalars it adds to each log entry."""
    from transformers import Trainer

    frame = sys._getframe(1)
    while frame is not None:
        owner = frame.f_locals.get("self")
        if isinstance(owner, Trainer):
            callbacks = owner.callback_handler.callbacks
            if callback in callbacks:
                callbacks.remove(callback)
                callbacks.insert(0, callback)
            return
        frame = frame.f_back  # type: ignore[assignment]


def _distributed() -> Any:
    import torch.distributed as dist

    return dist if dist.is_available() and dist.is_initialized() else None


def _broadcast(value: str) -> str:
    dist = _distributed()
    if dist is None:
        return value
    box = [value]
    dist.broadcast_object_list(box, src=0)
    return str(box[0])


def _barrier() -> None:
    dist = _distributed()
    if dist is not None:
        dist.barrier()


def _any_rank(flag: bool, world: int) -> bool:
    """True on every rank when it is True on one (the guard acts on all ranks at once)."""
    dist = _distributed() if world > 1 else None
    if dist is None:
        return flag
    import torch

    device = "cuda" if dist.get_backend() == "nccl" else "cpu"
    value = torch.tensor([1 if flag else 0], device=device)
    dist.all_reduce(value, op=dist.ReduceOp.MAX)
    return bool(value.item())
