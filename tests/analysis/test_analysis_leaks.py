"""Every leak kind, planted in a small real training loop: verdict, holder and rate.

Each scenario is recorded once (in-process, see ``harness.record_loop``) and checked by
several tests: the verdict and the named holder, the growth rate against the planted
bytes and items per step, and how soon the online rule fired.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
import torchleak
from torchleak.report import Report
from torchleak.analysis.diff import holder_name as diff_holder_name
from harness import Recorded, assert_leak, assert_rate, growth_per_step, record_loop
from loops import BATCH, HIDDEN, IN, graph_nodes, make_batches, make_model

STEPS = 240
SCRIPT = __file__


# 1. Outputs kept with their autograd graph on a trainer attribute (pattern 2) -----------
WIDE = 256  # logits of 16 x 256 float32: 16 KiB a step


class Trainer:
    def __init__(self) -> None:
        self.model = make_model(out=WIDE)
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.01)
        self.batches = make_batches(classes=WIDE)
        self.outputs: list[torch.Tensor] = []

    def fit(self, steps: int) -> None:
        for step in range(steps):
            x, y = self.batches[step % len(self.batches)]
            logits = self.model(x)
            loss = F.cross_entropy(logits, y)
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()
            self.outputs.append(logits)  # the leak: every step's logits and graph


def outputs_with_graph() -> None:
    Trainer().fit(STEPS)


# 2. running_loss += loss: a local tensor whose graph deepens every step (pattern 1) -----
LOSS_NODES: list[int] = []  # nodes one step adds, measured on the real graph


def running_loss_tensor() -> None:
    model = make_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    batches = make_batches()
    running_loss = torch.zeros(())
    for step in range(STEPS):
        x, y = batches[step % len(batches)]
        loss = F.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        before = graph_nodes(running_loss.grad_fn) if step == 20 else 0
        running_loss += loss  # the leak: should be loss.item()
        if step == 20:
            LOSS_NODES.append(graph_nodes(running_loss.grad_fn) - before)


# 3. An unbounded history of detached tensors on self (pattern 5) -----------------------
class HistoryTrainer:
    def __init__(self) -> None:
        self.model = make_model()
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.01)
        self.batches = make_batches()
        self.grad_norm_history: list[torch.Tensor] = []

    def fit(self, steps: int) -> None:
        for step in range(steps):
            x, y = self.batches[step % len(self.batches)]
            loss = F.cross_entropy(self.model(x), y)
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()
            # the leak: 4 x 2048 float32 (32 KiB) kept every step, never trimmed
            self.grad_norm_history.append(torch.randn(4, 2048))


def history_on_self() -> None:
    HistoryTrainer().fit(STEPS)


# 4. Lightning-style validation outputs never cleared: once per epoch (pattern 4) --------
EPOCH_STEPS, EPOCHS, VAL_BATCHES = 25, 10, 4
VAL_ITEM = 65536  # 64 Ki float32 = 256 KiB per validation batch, 1 MiB per epoch


class LitClassifier(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.net = make_model()
        self.validation_step_outputs: list[dict[str, torch.Tensor]] = []

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)

    def validation_step(self, x: torch.Tensor, y: torch.Tensor, i: int) -> None:
        loss = F.cross_entropy(self(x), y)
        preds = torch.full((VAL_ITEM,), float(i))
        self.validation_step_outputs.append({"loss": loss.detach(), "preds": preds})

    def on_validation_epoch_end(self) -> None:
        torch.stack([o["loss"] for o in self.validation_step_outputs]).mean()
        # the leak: no self.validation_step_outputs.clear()


def validation_outputs_per_epoch() -> None:
    module = LitClassifier()
    optimizer = torch.optim.SGD(module.parameters(), lr=0.01)
    batches, val = make_batches(), make_batches(VAL_BATCHES, seed=1)
    for epoch in range(EPOCHS):
        module.train()
        for step in range(EPOCH_STEPS):
            x, y = batches[step % len(batches)]
            loss = F.cross_entropy(module(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        module.eval()
        with torch.no_grad():
            for i, (x, y) in enumerate(val):
                module.validation_step(x, y, i)
        module.on_validation_epoch_end()


# 5. register_forward_hook inside the step, handle thrown away (pattern 14) -------------
def forward_hook_per_step() -> None:
    model = make_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    batches = make_batches()
    for step in range(STEPS):
        x, y = batches[step % len(batches)]
        feats: dict[str, torch.Tensor] = {}
        model[0].register_forward_hook(lambda m, i, o: feats.update(h=o.detach()))  # leak
        loss = F.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


# 6. lru_cache(maxsize=None) keyed by tensors: every step a new entry (pattern 23) -------
@functools.lru_cache(maxsize=None)
def build_pair_mask(x: torch.Tensor) -> torch.Tensor:
    return (x @ x.T > 0).float()  # 16 x 16, kept with its 16 x 32 key


def lru_cache_on_tensors() -> None:
    model = make_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    batches = make_batches()
    for step in range(STEPS):
        x, y = batches[step % len(batches)]
        x = x + 0.0  # a new tensor each step (as a DataLoader gives): hashes by id
        mask = build_pair_mask(x)
        loss = F.cross_entropy(model(x), y) + 0.0 * mask.sum()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


# 7. A figure per epoch, never closed (pattern 10) -------------------------------------
FIG_EPOCH_STEPS, FIG_EPOCHS = 20, 10


def figures_never_closed(folder: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    model = make_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    batches = make_batches()
    losses: list[float] = []
    for epoch in range(FIG_EPOCHS):
        for step in range(FIG_EPOCH_STEPS):
            x, y = batches[step % len(batches)]
            loss = F.cross_entropy(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        plt.figure(figsize=(2, 2))
        plt.plot(losses[-FIG_EPOCH_STEPS:])
        plt.savefig(folder / f"loss-{epoch}.png")  # the leak: no plt.close()
        torchleak.mark("epoch")


# 8. A module-level list appended inside forward (pattern 5) ---------------------------
_ACTIVATIONS: list[torch.Tensor] = []


class Recording(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = make_model()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.body[1](self.body[0](x))
        _ACTIVATIONS.append(h.detach())  # the leak: 16 x 64 float32 (4 KiB) every forward
        return self.body[2](h)


def global_list_in_forward() -> None:
    model = Recording()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    batches = make_batches()
    for step in range(STEPS):
        x, y = batches[step % len(batches)]
        loss = F.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


# 9. A metric that accumulates detached scores and is never reset (pattern 17) ---------
class ScoreMetric:
    def __init__(self) -> None:
        self.scores: list[torch.Tensor] = []

    def update(self, scores: torch.Tensor) -> None:
        self.scores.append(scores.detach())

    def compute(self) -> torch.Tensor:
        return torch.cat(self.scores).mean()

    def reset(self) -> None:
        self.scores.clear()


class MetricTrainer:
    def __init__(self) -> None:
        self.model = make_model(out=HIDDEN)  # 16 x 64 float32 scores: 4 KiB an update
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.01)
        self.batches = make_batches(classes=HIDDEN)
        self.train_metric = ScoreMetric()
        self.val_metric = ScoreMetric()

    def fit(self, epochs: int, steps: int) -> None:
        for epoch in range(epochs):
            for step in range(steps):
                x, y = self.batches[step % len(self.batches)]
                scores = self.model(x)
                loss = F.cross_entropy(scores, y)
                self.optimizer.zero_grad()
                loss.backward()
                self.optimizer.step()
                self.train_metric.update(scores.softmax(-1))  # never reset: the leak
                self.val_metric.update(scores.softmax(-1))
            self.train_metric.compute()
            self.val_metric.compute()
            self.val_metric.reset()


def metric_never_reset() -> None:
    MetricTrainer().fit(8, 30)


# 10. Weight snapshots copied to NumPy every step: the array's own data is the leak ------
def numpy_snapshots() -> None:
    import numpy as np

    model = make_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    batches = make_batches()
    weight_snapshots: list[np.ndarray] = []
    for step in range(STEPS):
        x, y = batches[step % len(batches)]
        loss = F.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        weight_snapshots.append(model[0].weight.detach().numpy().copy())  # HIDDEN x IN


# 11. Healthy for half a short run, then a debug cache keeps every step's hidden state ---
LATE_STEPS = 600


def late_debug_cache() -> None:
    model = make_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    batches = make_batches()
    debug_cache: dict[int, torch.Tensor] = {}
    for step in range(LATE_STEPS):
        x, y = batches[step % len(batches)]
        hidden = model[1](model[0](x))
        loss = F.cross_entropy(model[2](hidden), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step >= LATE_STEPS // 2:
            debug_cache[step] = hidden.detach().clone()


# The table ----------------------------------------------------------------------------
@dataclass
class Leak:
    train: Callable[..., None]
    names: tuple[str, ...]  # the culprit must contain one of these
    kind: str | None = None
    bytes_per_step: float | None = None  # the planted size, where the items have one
    objects_per_step: float | None = None  # the planted items (or graph nodes) per step
    onset: int = 1  # the step the growth starts at
    per_step: bool = True  # grows every step (else once per epoch)
    needs_folder: bool = False
    budget: float = 0.01  # torchleak run's default: 1% of wall time


LEAKS: dict[str, Leak] = {
    "outputs_with_graph": Leak(outputs_with_graph, ("Trainer.outputs",), "tensor_list_graph",
                               bytes_per_step=BATCH * WIDE * 4, objects_per_step=1),
    "running_loss": Leak(running_loss_tensor, ("running_loss",), "autograd_graph"),
    "history_on_self": Leak(history_on_self, ("HistoryTrainer.grad_norm_history",),
                            "tensor_list", bytes_per_step=4 * 2048 * 4, objects_per_step=1),
    "validation_outputs": Leak(validation_outputs_per_epoch, ("validation_step_outputs",),
                               bytes_per_step=VAL_BATCHES * VAL_ITEM * 4 / EPOCH_STEPS,
                               objects_per_step=VAL_BATCHES / EPOCH_STEPS, onset=EPOCH_STEPS,
                               per_step=False),
    # The same loop with the sampling a slower, real loop gets at the default budget: 20%
    # of its ~1 ms steps buys about the walks 1% buys an epoch of ~0.2 s steps.
    "validation_outputs_dense": Leak(validation_outputs_per_epoch, ("validation_step_outputs",),
                                     bytes_per_step=VAL_BATCHES * VAL_ITEM * 4 / EPOCH_STEPS,
                                     objects_per_step=VAL_BATCHES / EPOCH_STEPS,
                                     onset=EPOCH_STEPS, per_step=False, budget=0.2),
    "forward_hook": Leak(forward_hook_per_step, ("_forward_hooks",), "hooks",
                         objects_per_step=1),
    "lru_cache": Leak(lru_cache_on_tensors, ("build_pair_mask",), "cache", objects_per_step=1),
    "figures": Leak(figures_never_closed, ("figure", "pyplot"), "figures",
                    objects_per_step=1 / FIG_EPOCH_STEPS, onset=FIG_EPOCH_STEPS,
                    per_step=False, needs_folder=True),
    "global_list_in_forward": Leak(global_list_in_forward, ("_ACTIVATIONS",), "tensor_list",
                                   bytes_per_step=BATCH * HIDDEN * 4, objects_per_step=1),
    "numpy_snapshots": Leak(numpy_snapshots, ("weight_snapshots",),
                            bytes_per_step=HIDDEN * IN * 4, objects_per_step=1),
    "metric_never_reset": Leak(metric_never_reset, ("train_metric.scores",), "tensor_list",
                               bytes_per_step=BATCH * HIDDEN * 4, objects_per_step=1),
}

_recorded: dict[str, Recorded] = {}


@pytest.fixture
def leak_run(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
             ) -> tuple[Leak, Recorded]:
    name = request.param
    leak = LEAKS[name]
    if name not in _recorded:
        folder = tmp_path_factory.mktemp(name)
        train = functools.partial(leak.train, folder) if leak.needs_folder else leak.train
        try:
            _recorded[name] = record_loop(train, folder, name, SCRIPT, budget=leak.budget)
        finally:
            _cleanup()
    return leak, _recorded[name]


def _cleanup() -> None:
    """Release what a scenario leaked on purpose, so the next one starts clean."""
    _ACTIVATIONS.clear()
    build_pair_mask.cache_clear()
    import sys

    if "matplotlib.pyplot" in sys.modules:
        sys.modules["matplotlib.pyplot"].close("all")


scenarios = pytest.mark.parametrize("leak_run", list(LEAKS), indirect=True)


@scenarios
def test_verdict_names_the_holder(leak_run: tuple[Leak, Recorded]) -> None:
    leak, run = leak_run
    finding = assert_leak(run, *leak.names, kind=leak.kind)
    if finding.holder_path:  # the holder's identity travels as fields, not parsed text
        assert finding.holder_name and finding.holder_name in finding.holder_path, finding
        assert finding.holder_kind, finding
        assert diff_holder_name(finding) == finding.holder_name


@scenarios
def test_the_reports_dict_form_is_dataclasses_own(leak_run: tuple[Leak, Recorded]) -> None:
    """``Report.to_dict`` skips ``asdict``'s deep copies; what it gives is the same tree,
    and the JSON form reads back to the same report."""
    _leak, run = leak_run
    assert run.report.to_dict() == dataclasses.asdict(run.report)
    again = Report.from_dict(json.loads(run.report.to_json()))
    assert again is not None and again.to_dict() == run.report.to_dict()


@scenarios
def test_holder_size_matches_the_planted_size(leak_run: tuple[Leak, Recorded]) -> None:
    leak, run = leak_run
    if leak.bytes_per_step is None:
        pytest.skip("the holder's items have no size of their own")
    finding = assert_leak(run, *leak.names)
    assert_rate(finding.holder_bytes_per_step, leak.bytes_per_step,
                what="holder_bytes_per_step", run=run)


@scenarios
def test_rate_is_the_memory_the_process_loses(leak_run: tuple[Leak, Recorded]) -> None:
    """The rate a finding prints is the process's own measured growth (all findings on
    the signal together), not the holder's estimate of itself."""
    leak, run = leak_run
    finding = assert_leak(run, *leak.names)
    if finding.rate_basis == "shared":  # its growth is counted in the others' shares
        assert finding.bytes_per_step == 0, run.explain()
        return
    if finding.rate_basis != "measured":
        assert finding.bytes_per_step == finding.holder_bytes_per_step, run.explain()
        return
    steps = run.rows("SELECT step, uss FROM steps WHERE step > ? AND uss IS NOT NULL "
                     "ORDER BY step", max(3, min(50, run.report.steps // 10)))
    slope = growth_per_step([float(s) for s, _ in steps], [float(u) for _, u in steps])
    total = sum(f.bytes_per_step or 0.0 for f in run.report.serious
                if f.signal == finding.signal and f.rate_basis == "measured")
    # A short run's USS climbs in allocator steps (plateaus while freed pages are reused):
    # estimators of its growth differ by up to ~2x on the same series, a holder's own
    # estimate by up to thousands of times.
    assert_rate(total, slope, low=1 / 3, high=3, what="the findings' summed rate", run=run)


@scenarios
def test_objects_per_step_matches_the_planted_items(leak_run: tuple[Leak, Recorded]) -> None:
    leak, run = leak_run
    truth = leak.objects_per_step
    if truth is None:  # graph nodes: measured on the real graph while it ran
        assert LOSS_NODES, "the scenario did not measure its graph"
        truth = LOSS_NODES[0]
    finding = assert_leak(run, *leak.names)
    assert_rate(finding.objects_per_step, truth, low=0.7, high=1.4, what="objects_per_step",
                run=run)


@scenarios
def test_detected_soon_after_onset(leak_run: tuple[Leak, Recorded]) -> None:
    leak, run = leak_run
    finding = assert_leak(run, *leak.names)
    assert finding.detected_at_step is not None, run.explain()
    assert finding.detected_at_step >= leak.onset, run.explain()
    if leak.per_step:
        assert finding.detected_at_step <= leak.onset + 60, run.explain()
    else:
        # A holder must gain 4 items after warm-up
        # (MIN_ITEMS_GROWTH), in at least 3 rises (MIN_RISES): max(3, ceil(4 / k)) epochs
        # with k items an epoch; allow two more for the sampling.
        epoch = EPOCH_STEPS if "validation" in leak.names[0] else FIG_EPOCH_STEPS
        items_per_epoch = leak.objects_per_step * epoch
        epochs = max(3, math.ceil(4 / items_per_epoch)) + 2
        assert finding.detected_at_step <= leak.onset + epochs * epoch, run.explain()


@pytest.mark.parametrize("leak_run", ["validation_outputs_dense"], indirect=True)
def test_validation_staircase_is_reported_per_epoch(leak_run: tuple[Leak, Recorded]) -> None:
    leak, run = leak_run
    finding = assert_leak(run, "validation_step_outputs")
    assert finding.per_epoch, run.explain()
    assert "/epoch" in finding.culprit, run.explain()
    # The walker sizes the holder's epoch of outputs; the printed rate is what the process
    # lost per epoch, allocator overhead included, so it is checked against the USS.
    planted = VAL_BATCHES * VAL_ITEM * 4
    assert_rate(finding.holder_bytes_per_step * EPOCH_STEPS, planted,
                what="the holder's bytes per epoch", run=run)
    steps = run.rows("SELECT step, uss FROM steps WHERE step > ? AND uss IS NOT NULL "
                     "ORDER BY step", EPOCH_STEPS)
    lost = growth_per_step([float(s) for s, _ in steps], [float(u) for _, u in steps])
    assert_rate(finding.bytes_per_epoch, lost * EPOCH_STEPS, what="bytes_per_epoch", run=run)


def test_a_holder_that_starts_growing_late_in_a_short_run_is_named(
        tmp_path_factory: pytest.TempPathFactory) -> None:
    """The holder walk's log-spaced anchors run whatever the budget has left, so a holder
    born half-way through a run of a few seconds is still walked while it grows."""
    folder = tmp_path_factory.mktemp("late")
    try:
        run = record_loop(late_debug_cache, folder, "late_debug_cache", SCRIPT)
    finally:
        _cleanup()
    finding = assert_leak(run, "debug_cache")
    assert finding.detected_at_step is not None and \
        LATE_STEPS // 2 <= finding.detected_at_step < LATE_STEPS, run.explain()
    assert_rate(finding.holder_bytes_per_step, BATCH * HIDDEN * 4,
                what="holder_bytes_per_step", run=run)


def two_leaks() -> None:
    model = make_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    batches = make_batches()
    epoch_logits, running_loss = [], torch.zeros(())
    for step in range(STEPS):
        x, y = batches[step % len(batches)]
        logits = model(x)
        loss = F.cross_entropy(logits, y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        epoch_logits.append(logits)  # with its graph
        running_loss = running_loss + loss.detach() * 0 + loss  # a graph that chains


def test_findings_on_one_signal_share_one_projection(
        tmp_path_factory: pytest.TempPathFactory) -> None:
    """The process loses what all its holders keep at once: every finding on a signal
    projects the same time to the limit, from their rates added up."""
    run = record_loop(two_leaks, tmp_path_factory.mktemp("two"), "two_leaks", SCRIPT)
    on_uss = [f for f in run.report.serious if f.signal == "main_uss" and f.oom is not None]
    assert len(on_uss) >= 2, run.explain()
    assert len({f.oom.steps_to_oom for f in on_uss}) == 1, run.explain()
    together = sum(f.bytes_per_step or 0.0 for f in on_uss)
    assert on_uss[0].oom.bytes_per_step >= together - 1, run.explain()
