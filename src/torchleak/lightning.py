"""Lightning: ``Trainer(callbacks=[TorchleakCallback()])`` records the run with the one
engine ``torchleak run`` uses (same trace, live warnings, guard and final report).

- works with ``lightning.pytorch`` and ``pytorch_lightning`` (the one the program imported,
  else whichever is installed; an instance of both when the program imported both);
- phase marks from the trainer's hooks: epochs, validation, test;
- the per-step memory series (main process, DataLoader workers, CUDA, tensors) and the
  findings go to every logger of the trainer (``trainer.loggers``, ``log_metrics``; the
  findings' text also to TensorBoard's ``add_text``);
- the guard (``guard="checkpoint"|"stop"``) saves with ``trainer.save_checkpoint`` and
  stops through ``trainer.should_stop``; under DDP every rank decides together;
- under DDP every rank records its own trace in one shared run folder and rank 0 prints
  the summary of all ranks.

Each ``fit``/``validate``/``test`` call is one run; under ``torchleak run`` the callback
adds its marks, logging and guard to the run that is already recording.
"""

from __future__ import annotations

import os
from typing import Any

from torchleak.check.crossref import annotate
from torchleak.live.attach import PREFIX, FrameworkRun, finding_text


_FLAVOURS = ("lightning.pytorch", "pytorch_lightning")


def _callback_bases() -> tuple[type, ...]:
    """Lightning's Callback of each flavour the program imported (both: the callback is
    an instance of both), else of the first one installed."""
    import importlib
    import sys

    imported = [name for name in _FLAVOURS if name in sys.modules]
    for name in imported or _FLAVOURS:
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        bases = [module.Callback]
        for other in imported:
            if other != name:
                bases.append(importlib.import_module(other).Callback)
        return tuple(bases)
    raise ImportError("torchleak.lightning needs Lightning: pip install lightning "
                      "(or pytorch-lightning)")


class TorchleakCallback(*_callback_bases()):  # type: ignore[misc]
    """Record, watch and guard a Lightning run.

    Options are those of ``torchleak.monitor()`` (out, name, budget, limit, guard,
    guard_share, guard_minutes, quiet, warnings); ``log_every_n_steps`` sets how often
    the memory series goes to the loggers (default: every step).
    """

    def __init__(self, log_every_n_steps: int = 1, **options: Any) -> None:
        super().__init__()
        self.log_every_n_steps = max(1, int(log_every_n_steps)) if isinstance(
            log_every_n_steps, int) else 1
        self._run = FrameworkRun({"annotate": annotate, **options}, "TorchleakCallback")
        self.report: Any = None  # the Report of the latest run (None on ranks > 0)
        self.guard_checkpoint: str | None = None  # where the guard's checkpoint went

    @property
    def monitor(self) -> Any:
        return self._run.monitor

    # lifecycle ------------------------------------------------------------------------------
    def setup(self, trainer: Any, pl_module: Any, stage: str) -> None:
        if self._run.active:
            return
        world = int(getattr(trainer, "world_size", 1) or 1)
        self._run.start(type(pl_module).__name__, int(getattr(trainer, "global_rank", 0)),
                        world, broadcast=lambda value: _broadcast(trainer, value))
        self._run.set_stopper(lambda: setattr(trainer, "should_stop", True))

    def teardown(self, trainer: Any, pl_module: Any, stage: str) -> None:
        self._stop(trainer, crashed=False)

    def on_exception(self, trainer: Any, pl_module: Any, exception: BaseException) -> None:
        self._stop(trainer, crashed=True)

    def _stop(self, trainer: Any, crashed: bool) -> None:
        if not self._run.active:
            return
        self._log(trainer, force=True)
        barrier = getattr(getattr(trainer, "strategy", None), "barrier", None)
        report = self._run.stop(crashed, barrier=barrier if callable(barrier) else None)
        if report is not None:
            self.report = report
            _log_verdict(trainer, report)

    # phases -------------------------------------------------------------------------------
    def on_train_epoch_end(self, trainer: Any, pl_module: Any) -> None:
        self._run.mark("epoch", trainer.current_epoch + 1)

    def on_validation_start(self, trainer: Any, pl_module: Any) -> None:
        self._run.mark("validation_start")

    def on_validation_end(self, trainer: Any, pl_module: Any) -> None:
        self._run.mark("validation_end")

    def on_test_start(self, trainer: Any, pl_module: Any) -> None:
        self._run.mark("test_start")

    def on_test_end(self, trainer: Any, pl_module: Any) -> None:
        self._run.mark("test_end")

    # every batch ----------------------------------------------------------------------------
    def on_train_batch_end(self, trainer: Any, pl_module: Any, outputs: Any, batch: Any,
                           batch_idx: int) -> None:
        if not self._run.active:
            return
        if trainer.global_step % self.log_every_n_steps == 0:
            self._log(trainer)
        self._guard(trainer)

    def _log(self, trainer: Any, force: bool = False) -> None:
        metrics = self._run.metrics()
        findings = self._run.new_findings()
        if not metrics or (not force and not trainer.loggers):
            return
        step = int(trainer.global_step)
        for logger in trainer.loggers:
            try:
                logger.log_metrics(metrics, step=step)
                for finding in findings:
                    _log_text(logger, finding_text(finding), step)
            except Exception as err:  # noqa: BLE001 - a logger's failure is not the run's
                self._run.event("logger_failed", f"{type(logger).__name__}: {err}")

    def _guard(self, trainer: Any) -> None:
        """The guard fired (checkpoint/stop): every rank saves and stops together."""
        event = self._run.guard_action()
        fired = event is not None
        if self._run.world > 1:
            fired = bool(trainer.strategy.reduce_boolean_decision(fired, all=False))
        if not fired:
            return
        path = os.path.join(_checkpoint_dir(trainer),
                            f"torchleak-guard-step{trainer.global_step}.ckpt")
        try:
            trainer.save_checkpoint(path)
            self.guard_checkpoint = path
            self._run.event("guard", f"checkpoint saved: {path}")
        except Exception as err:  # noqa: BLE001 - reported; the guard still stops
            self._run.event("guard", f"checkpoint failed: {type(err).__name__}: {err}")
        mode = event.mode if event is not None else self._run_mode()
        if mode == "stop":
            trainer.should_stop = True

    def _run_mode(self) -> str:
        monitor = self._run.monitor
        return monitor.options.guard if monitor is not None else "warn"


def _broadcast(trainer: Any, value: str) -> str:
    strategy = getattr(trainer, "strategy", None)
    if strategy is None:
        return value
    return str(strategy.broadcast(value, src=0))


def _checkpoint_dir(trainer: Any) -> str:
    callback = getattr(trainer, "checkpoint_callback", None)
    folder = getattr(callback, "dirpath", None)
    return str(folder or os.path.join(trainer.default_root_dir, "checkpoints"))


def _log_text(logger: Any, text: str, step: int) -> None:
    """Findings as text where the logger takes text (TensorBoard's add_text)."""
    experiment = getattr(logger, "experiment", None)
    add_text = getattr(experiment, "add_text", None)
    if callable(add_text):
        add_text(f"{PREFIX}findings", text.replace("\n", "  \n"), step)


def _log_verdict(trainer: Any, report: Any) -> None:
    metrics = {f"{PREFIX}verdict_leak": float(report.verdict == "leak"),
               f"{PREFIX}serious_findings": float(len(report.serious))}
    for logger in getattr(trainer, "loggers", []):
        try:
            logger.log_metrics(metrics, step=int(trainer.global_step))
            logger.save()
        except Exception:  # noqa: BLE001 - the verdict is in the trace and on stderr anyway
            pass
