"""Memory kept by torch or the interpreter rather than a container the user filled: each
named as the user would write it, with a fix that stops it, beside a twin where the fix is
applied and nothing is called. Holders sized by what they keep alive, and a buffer
rebound to a bigger tensor every step, are named too."""

from __future__ import annotations

import io
import sys
import warnings
import weakref
from collections.abc import Callable

import pytest
import torch
import torch.nn.functional as F
from harness import Recorded, assert_healthy, assert_leak, scenario_fixture
from loops import train_with_hook

SCRIPT = __file__
STEPS = 240


def _train(on_step: Callable[[int, torch.Tensor], None], steps: int = STEPS) -> None:
    train_with_hook(on_step, steps)


# A warning whose message carries per-step numbers: one registry entry each -------------
def per_step_warnings(silenced: bool) -> None:
    module = sys.modules[__name__]
    with warnings.catch_warnings():
        warnings.simplefilter("default")
        if silenced:
            warnings.filterwarnings("ignore", message="clipped")
        warnings.showwarning = lambda *args, **kwargs: None  # routed away, as to logging

        def on_step(step: int, loss: torch.Tensor) -> None:
            for i in range(40):
                warnings.warn(f"clipped batch {step} sample {i}: {loss.item():.6f}")

        try:
            _train(on_step)
        finally:
            vars(module).pop("__warningregistry__", None)


# A loop inside one autocast block, casting a new leaf that requires grad every step -------
def adversarial_autocast(per_step: bool) -> None:
    model = torch.nn.Sequential(torch.nn.Linear(512, 256), torch.nn.ReLU(),
                                torch.nn.Linear(256, 10))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)

    def step() -> None:
        x, y = torch.randn(64, 512), torch.randint(0, 10, (64,))
        adversarial = x.clone().requires_grad_(True)
        grad, = torch.autograd.grad(F.cross_entropy(model(adversarial), y), adversarial)
        adversarial = (adversarial + 0.01 * grad.sign()).detach().requires_grad_(True)
        loss = F.cross_entropy(model(adversarial), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

    if per_step:
        for _ in range(STEPS):
            with torch.autocast("cpu", dtype=torch.bfloat16):
                step()
    else:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            for _ in range(STEPS):
                step()


# The profiler left recording for the whole run ------------------------------------------
def profiler_left_on() -> None:
    def more_ops(step: int, loss: torch.Tensor) -> None:
        x = torch.ones(8)
        for _ in range(200):  # a step of many small operators: events pile up
            x = x * 1.0001

    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU],
                                record_shapes=True):
        _train(more_ops, steps=300)


# A weak-valued mapping whose keys keep their values alive --------------------------------
class Upload:
    def __init__(self, data: torch.Tensor) -> None:
        self.data = data


class Request:
    def __init__(self, upload: Upload) -> None:
        self.upload = upload


UPLOADS: weakref.WeakValueDictionary[Request, Upload] = weakref.WeakValueDictionary()
CLEANUP: list[Callable[[], None]] = []


def weak_values() -> None:
    def on_step(step: int, loss: torch.Tensor) -> None:
        upload = Upload(torch.randn(64, 256))  # 64 KiB a step, kept by its key
        UPLOADS[Request(upload)] = upload

    _train(on_step)
    CLEANUP.append(UPLOADS.clear)  # after the end-of-run walk: kept until the run ends


# A registered buffer rebound to a bigger tensor every step (a MoCo queue) ----------------
class QueueModel(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.encoder = torch.nn.Linear(64, 64)
        self.register_buffer("negatives", torch.zeros(0, 64))


def rebound_buffer() -> None:
    model = QueueModel()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    for _ in range(STEPS):
        keys = F.normalize(model.encoder(torch.randn(128, 64)), dim=1)
        loss = (keys @ torch.cat([keys.detach(), model.negatives]).T).logsumexp(1).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        model.negatives = torch.cat([model.negatives, keys.detach()])


# A text log kept in memory --------------------------------------------------------------
def string_log() -> None:
    log = io.StringIO()
    _train(lambda step, loss: log.write(f"step {step} {loss.item():.5f} " + "w" * 60000))
    log.close()


SCENARIOS: dict[str, Callable[[], None]] = {
    "per_step_warnings": lambda: per_step_warnings(False),
    "silenced_warnings": lambda: per_step_warnings(True),
    "autocast_one_block": lambda: adversarial_autocast(False),
    "autocast_per_step": lambda: adversarial_autocast(True),
    "profiler_left_on": profiler_left_on,
    "weak_values": weak_values,
    "rebound_buffer": rebound_buffer,
    "string_log": string_log,
}
scenario = scenario_fixture(SCENARIOS, CLEANUP, SCRIPT)


@pytest.mark.parametrize("scenario", ["per_step_warnings"], indirect=True)
def test_a_warning_registry_filled_every_step_is_named(scenario: Recorded) -> None:
    finding = assert_leak(scenario, "__warningregistry__")
    assert finding.pattern == "warning-registry" and "per-step values" in finding.fix


@pytest.mark.parametrize("scenario", ["autocast_one_block"], indirect=True)
def test_a_loop_inside_one_autocast_block_names_its_cast_cache(scenario: Recorded) -> None:
    finding = assert_leak(scenario, "autocast")
    assert finding.pattern == "autocast-cache" and "cache_enabled=False" in finding.fix


@pytest.mark.parametrize("scenario", ["profiler_left_on"], indirect=True)
def test_the_profiler_left_recording_is_named(scenario: Recorded) -> None:
    finding = assert_leak(scenario, "profiler")
    assert finding.pattern == "profiler-left-on" and "schedule" in finding.fix


@pytest.mark.parametrize("scenario", ["weak_values"], indirect=True)
def test_a_weak_mapping_is_sized_by_what_its_keys_keep_alive(scenario: Recorded) -> None:
    finding = assert_leak(scenario, "UPLOADS")
    assert (finding.holder_bytes_per_step or 0) >= 48 * 1024, scenario.explain()


@pytest.mark.parametrize("scenario", ["rebound_buffer"], indirect=True)
def test_a_buffer_rebound_to_a_bigger_tensor_is_named(scenario: Recorded) -> None:
    assert_leak(scenario, "negatives")


@pytest.mark.parametrize("scenario", ["string_log"], indirect=True)
def test_a_text_log_in_memory_is_named(scenario: Recorded) -> None:
    finding = assert_leak(scenario, "log")
    assert finding.kind == "buffer"


@pytest.mark.parametrize("scenario", ["silenced_warnings", "autocast_per_step"],
                         indirect=True)
def test_with_the_fix_applied_nothing_is_called(scenario: Recorded) -> None:
    assert_healthy(scenario)
