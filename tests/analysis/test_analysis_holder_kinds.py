"""Memory kept by a background thread, one growing buffer, a registry the user never sees,
and memory outside Python altogether: each named by its route (or, for native memory,
by the evidence and no invented holder), each beside a healthy twin that stays quiet."""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable

import pytest
import torch
from harness import (Recorded, assert_healthy, assert_leak, run_cli, run_plain, scenario_fixture,
                     theil_sen)
from loops import train_with_hook

SCRIPT = __file__
STEPS = 240


def _train(on_step: Callable[[int, torch.Tensor], None], steps: int = STEPS) -> None:
    train_with_hook(on_step, steps)


# 1. A metrics flusher thread whose own frame keeps what it receives ----------------------
class MetricsFlusher(threading.Thread):
    """Flushes when ``flush_every`` records are pending; with a large one it never does."""

    def __init__(self, flush_every: int) -> None:
        super().__init__(name="MetricsFlusher", daemon=True)
        self.inbox: queue.Queue[bytes | None] = queue.Queue()
        self.flush_every = flush_every

    def run(self) -> None:
        pending: list[bytes] = []
        while True:
            record = self.inbox.get()
            if record is None:
                return
            pending.append(record)
            if len(pending) >= self.flush_every:
                pending = []  # "written out"


def flusher(flush_every: int) -> None:
    worker = MetricsFlusher(flush_every)
    worker.start()
    _train(lambda step, loss: worker.inbox.put(bytes(64 * 1024)))  # 64 KiB a step
    worker.inbox.put(None)
    worker.join()


# 2. A bytearray global extended in place: no new items, one object that grows -----------
LOG = bytearray()


def growing_buffer(bounded: bool) -> None:
    global LOG
    LOG = bytearray()

    def on_step(step: int, loss: torch.Tensor) -> None:
        global LOG
        LOG += b"x" * (64 * 1024)
        if bounded:
            LOG = LOG[-256 * 1024:]

    _train(on_step)
    LOG = bytearray()


# 3. A global forward hook registered every step (a registry the user never sees) ---------
def global_hooks(remove: bool) -> None:
    def on_step(step: int, loss: torch.Tensor) -> None:
        captured = torch.randn(64, 64)  # 16 KiB each hook keeps

        def keep_activation(module: torch.nn.Module, args: object, out: object) -> None:
            captured.add_(0)

        handle = torch.nn.modules.module.register_module_forward_hook(keep_activation)
        if remove:
            handle.remove()

    try:
        _train(on_step)
    finally:
        torch.nn.modules.module._global_forward_hooks.clear()


# 4. The interpreter's registries, filled once per step --------------------------------
def registries_every_step() -> None:
    import atexit
    import logging
    import weakref

    logger = logging.getLogger("torchleak-test-registries")
    added: list[Callable[[], None]] = []

    class Batch:
        pass

    def on_step(step: int, loss: torch.Tensor) -> None:
        def flush_at_exit(value: float = loss.item()) -> None:
            print(value)

        atexit.register(flush_at_exit)
        added.append(flush_at_exit)
        logger.addHandler(logging.NullHandler())
        batch = Batch()
        weakref.finalize(batch, print, "batch done")
        KEEP.append(batch)

    _train(on_step)
    CLEANUP.extend([lambda: [atexit.unregister(fn) for fn in added], logger.handlers.clear,
                    KEEP.clear])


KEEP: list[object] = []
CLEANUP: list[Callable[[], object]] = []  # run once the run is recorded (its end included)
SCENARIOS: dict[str, Callable[[], None]] = {
    "thread_keeps_pending": lambda: flusher(10**9),
    "thread_flushes": lambda: flusher(8),
    "bytearray_grows": lambda: growing_buffer(False),
    "bytearray_bounded": lambda: growing_buffer(True),
    "global_hook_per_step": lambda: global_hooks(False),
    "global_hook_removed": lambda: global_hooks(True),
    "registries_every_step": registries_every_step,
}
scenario = scenario_fixture(SCENARIOS, CLEANUP, SCRIPT)


@pytest.mark.parametrize("scenario", ["thread_keeps_pending"], indirect=True)
def test_a_thread_frames_local_is_named(scenario: Recorded) -> None:
    finding = assert_leak(scenario, "thread MetricsFlusher in run(): local pending")
    assert "thread-state" == finding.pattern and "flush" in finding.fix


@pytest.mark.parametrize("scenario", ["bytearray_grows"], indirect=True)
def test_a_buffer_growing_in_place_is_named(scenario: Recorded) -> None:
    finding = assert_leak(scenario, "global LOG", kind="buffer")
    assert finding.holder_bytes_per_step == pytest.approx(64 * 1024, rel=0.2)


@pytest.mark.parametrize("scenario", ["global_hook_per_step"], indirect=True)
def test_a_global_hook_registry_is_named(scenario: Recorded) -> None:
    finding = assert_leak(scenario, "global module hooks", kind="hooks")
    assert finding.objects_per_step == pytest.approx(1.0, rel=0.3)
    assert "remove()" in finding.fix


@pytest.mark.parametrize("scenario", ["registries_every_step"], indirect=True)
def test_the_interpreters_registries_are_named(scenario: Recorded) -> None:
    for name in ("atexit callbacks", "logging handlers", "weakref.finalize"):
        assert_leak(scenario, name)


@pytest.mark.parametrize("scenario", ["thread_flushes", "bytearray_bounded",
                                      "global_hook_removed"], indirect=True)
def test_healthy_twins_stay_quiet(scenario: Recorded) -> None:
    assert_healthy(scenario)


NATIVE = """
    import ctypes

    import torch

    libc = ctypes.CDLL(None)
    libc.malloc.restype = ctypes.c_void_p
    libc.malloc.argtypes = [ctypes.c_size_t]
    torch.manual_seed(0)
    model = torch.nn.Linear(32, 4)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    kept = 0
    for step in range(400):
        loss = model(torch.randn(16, 32)).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        block = libc.malloc(96 * 1024)  # a C library's buffer, never freed
        ctypes.memset(block, 1, 96 * 1024)
        kept += 1
    print("kept", kept)
"""


@pytest.mark.slow
def test_native_memory_is_called_a_leak_with_evidence_and_no_invented_holder(tmp_path) -> None:
    # A census at the anchors, as a run of minutes gets under the default budget (this one
    # lasts half a second: the live detector may see its growth only as it ends).
    proc, report = run_cli(tmp_path, NATIVE, "--budget", "20")
    assert proc.returncode == 0, proc.stderr
    assert report is not None and report["verdict"] == "leak", report
    top = report["findings"][0]
    assert top["kind"] == "native_memory" and top["severity"] in ("high", "medium"), top
    assert top["holder_path"] is None  # the memory has no Python holder: none is made up
    assert "native memory" in top["culprit"] and "memray run --native" in top["fix"]
    evidence = " ".join(top["evidence"])
    assert "Python objects" in evidence and "tensor bytes" in evidence, evidence
    assert "libc" in evidence or "CDLL" in evidence, evidence  # the handle in reach


KEPT_SCALARS = """
    import os

    import torch
    import torch.nn.functional as F


    def uss():
        with open("/proc/self/statm") as f:
            fields = f.read().split()
        return (int(fields[1]) - int(fields[2])) * os.sysconf("SC_PAGE_SIZE")


    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = torch.nn.Sequential(torch.nn.Linear(512, 1024), torch.nn.ReLU(),
                                torch.nn.Linear(1024, 10))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    losses = []
    for step in range(1, 801):
        loss = F.cross_entropy(model(torch.randn(128, 512)), torch.randint(0, 10, (128,)))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.KEEP)
        if step % 10 == 5:  # off the recorder's census steps (100, 200, 400, ...)
            print("uss", step, uss(), flush=True)
"""


def _printed_slope(stdout: str) -> float:
    """The script's own USS growth per step: the median of pairwise slopes of its reads.
    The C allocator grows the heap in stairs whose pace changes within a run (a run may
    grow 20 KiB/step for 500 steps, then 100 KiB/step); a least-squares line follows the
    last burst, the median slope the run, as the rate the finding prints does."""
    points = [tuple(map(int, line.split()[1:])) for line in stdout.splitlines()
              if line.startswith("uss ")]
    steps, uss = zip(*[p for p in points if p[0] > 80])
    return theil_sen(list(steps), list(uss))


@pytest.mark.slow
def test_kept_scalars_name_allocator_retention_with_the_rate_the_process_loses(tmp_path) -> None:
    leaky = tmp_path / "leaky"
    leaky.mkdir()
    proc, report = run_cli(leaky, KEPT_SCALARS.replace("KEEP", "detach()"))
    assert proc.returncode == 0 and report is not None, proc.stderr
    assert report["verdict"] == "leak", report
    top = report["findings"][0]
    assert top["cause"] == "allocator_retention" and top["pattern"] == "allocator-retention"
    assert ".item()" in top["fix"] and "--safe" in top["fix"]
    slope = _printed_slope(proc.stdout)
    rate = top["bytes_per_step"]
    # The C allocator grows the heap in stairs, and how fast differs between runs of this
    # script (1.5 to 56 KiB a step seen): at a few KiB a step the run grows by a few
    # stairs in all, and two fits of it differ by a stair. So: within 1.5x, or within
    # 4 MiB over the steps the script's reads span.
    span = 710
    assert slope / 1.5 <= rate <= slope * 1.5 or abs(rate - slope) * span <= 4 << 20, (
        top, slope)
    # The time to OOM follows from that rate (tied to the process's own above).
    oom = top["oom"]
    expected = (oom["limit_bytes"] - oom["current_bytes"]) / rate
    assert expected / 1.5 <= oom["steps_to_oom"] <= expected * 1.5, oom
    assert top["holder_bytes_per_step"] < 1024  # the list itself is tiny: the heap is not

    fixed = tmp_path / "fixed"
    fixed.mkdir()
    fixed_source = KEPT_SCALARS.replace("KEEP", "item()")
    proc, report = run_cli(fixed, fixed_source)
    assert report is not None and report["verdict"] == "no_leak", report
    # The fix the finding gives is flat by comparison, as the script runs on its own: under
    # the recorder the process also grows by the live detector's working set while its
    # series fill (2-7 MiB over these 800 steps, bounded; 2-7 KiB a step against the leak's
    # 7-115 KiB), which is not the script's behaviour.
    plain = run_plain(fixed, fixed_source)
    assert plain.returncode == 0, plain.stderr
    assert _printed_slope(plain.stdout) < 0.3 * slope
