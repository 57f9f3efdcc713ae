"""A live warning the end would keep: healthy runs whose memory grows early (a Dataset
memoised during the first epoch, a buffer flushed every 150 steps, a list cleared at the
end of the only epoch) are never warned about nor stopped, and the guard acts on the
memory the limit counts, wherever the training runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from recordkit import (Recorded, RunPool, child_env, memory_cgroup, prefetch, record,
                       run_python, write_script)

from torchleak.errors import EXIT_GUARD

pytestmark = pytest.mark.slow
MIB = 1024 * 1024

PEAK = """
    import atexit, resource
    atexit.register(lambda: print("peak", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
                                  * 1024, flush=True))
"""

# ~60 MiB of rendered samples kept during the first of four epochs, then only read.
MEMO = PEAK + """
    import torch
    import torch.nn.functional as F
    from torch.utils.data import DataLoader, Dataset

    torch.manual_seed(0)
    torch.set_num_threads(1)


    class Rendered(Dataset):
        def __init__(self):
            self.memo = {}

        def __len__(self):
            return 1200

        def __getitem__(self, i):
            if i not in self.memo:
                g = torch.Generator().manual_seed(i)
                self.memo[i] = (torch.rand(3, 64, 64, generator=g), i % 10)
            return self.memo[i]


    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(3 * 64 * 64, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loader = DataLoader(Rendered(), batch_size=12, shuffle=True)
    for epoch in range(4):
        for x, y in loader:
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
    print("done")
"""

FLUSHED = """
    import io
    import torch

    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = torch.nn.Linear(128, 512)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    pending, sink = [], io.BytesIO()
    for step in range(1, 481):
        hidden = model(torch.randn(64, 128))
        loss = hidden.pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        pending.append(hidden.detach().clone())
        if len(pending) == 150:
            torch.save(torch.stack(pending).mean(0), sink)
            pending.clear()
    print("done")
"""

ONE_EPOCH = """
    import torch
    import torch.nn.functional as F
    from torch.utils.data import DataLoader, TensorDataset

    torch.manual_seed(0)
    torch.set_num_threads(1)
    data = TensorDataset(torch.randn(300 * 32, 64), torch.randint(0, 500, (300 * 32,)))
    model = torch.nn.Linear(64, 500)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    history = []
    for x, y in DataLoader(data, batch_size=32):
        logits = model(x)
        loss = F.cross_entropy(logits, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        history.append(logits.detach())
    print("epoch accuracy", float(torch.cat(history).argmax(1).float().mean()) >= 0)
    history.clear()
"""

# A leak on a training thread; the main thread reports success once it has joined.
THREADED = """
    import threading
    import torch

    kept = []

    def train():
        model = torch.nn.Linear(64, 8)
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        for step in range(1, 100001):
            loss = model(torch.randn(32, 64)).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            kept.append(torch.ones(256 * 1024))

    worker = threading.Thread(target=train)
    worker.start()
    worker.join()
    print("training completed", flush=True)
"""

# A fixed working set, then steady steps: it never grows.
STABLE = PEAK + """
    import torch

    torch.set_num_threads(1)
    working_set = torch.ones(40 * 1024 * 1024)  # 160 MiB, held for the whole run
    model = torch.nn.Linear(64, 8)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for step in range(300):
        loss = model(torch.randn(32, 64)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    print("done", float(working_set[0]))
"""


def _peak(stdout: str) -> int:
    return int(stdout.split("peak")[1].split()[0])


@prefetch
def memo(folder: Path) -> tuple[int, Recorded]:
    script = write_script(folder, "memo.py", MEMO)
    plain = run_python([script.name], cwd=folder)
    assert plain.returncode == 0, plain.stderr
    limit = int(_peak(plain.stdout) * 1.4)
    return limit, record(folder, script, options=("--limit", str(limit), "--guard", "stop",
                                                  "--json", str(folder / "memo.json")))


def test_a_dataset_memoised_in_its_first_epoch_is_neither_warned_about_nor_stopped(
        runs: RunPool) -> None:
    limit, run = runs.get(memo)
    assert run.proc.returncode == 0 and "done" in run.proc.stdout, run.proc.stderr
    assert "leak detected" not in run.proc.stderr and "GUARD" not in run.proc.stderr
    report = json.loads((run.out.parent / "memo.json").read_text())
    assert report["verdict"] == "no_leak", report["findings"]
    assert report["live"]["tier"] != "called" and report["live"]["calls"] == []
    assert report["guard"] is None and _peak(run.proc.stdout) < limit


@prefetch
def flushed(folder: Path) -> Recorded:
    script = write_script(folder, "flushed.py", FLUSHED)
    return record(folder, script, options=("--json", str(folder / "flushed.json")))


def test_a_buffer_flushed_every_150_steps_is_not_warned_about(runs: RunPool) -> None:
    run = runs.get(flushed)
    assert run.proc.returncode == 0, run.proc.stderr
    assert "leak detected" not in run.proc.stderr
    report = json.loads((run.out.parent / "flushed.json").read_text())
    assert report["verdict"] == "no_leak" and report["live"]["calls"] == []


@prefetch
def one_epoch(folder: Path) -> Recorded:
    script = write_script(folder, "one_epoch.py", ONE_EPOCH)
    return record(folder, script, options=("--fail-on-leak", "--json",
                                           str(folder / "one_epoch.json")))


def test_a_list_cleared_at_the_end_of_the_only_epoch_is_released_not_leaked(
        runs: RunPool) -> None:
    run = runs.get(one_epoch)
    assert run.proc.returncode == 0, run.proc.stderr  # --fail-on-leak: no leak
    assert "never emptied" not in run.proc.stderr and "leak detected" not in run.proc.stderr
    report = json.loads((run.out.parent / "one_epoch.json").read_text())
    assert report["verdict"] == "no_leak", report["findings"]
    lengths = run.rows("SELECT length FROM holders WHERE holder LIKE '%history' ORDER BY step")
    assert lengths[-1] == (0,) and max(lengths)[0] >= 100, lengths


@prefetch
def threaded(folder: Path) -> Recorded:
    script = write_script(folder, "threaded.py", THREADED)
    limit = 900 * MIB
    return record(folder, script, options=("--limit", str(limit), "--guard", "stop"))


def test_the_guard_stops_a_leak_on_a_training_thread_and_the_program_ends_with_75(
        runs: RunPool) -> None:
    run = runs.get(threaded)
    assert run.proc.returncode == EXIT_GUARD, (run.proc.returncode, run.proc.stderr[-2000:])
    assert "training completed" not in run.proc.stdout
    assert "GUARD at step" in run.proc.stderr
    assert run.meta("status") == "stopped"


def test_a_stable_working_set_under_a_cgroup_limit_completes_with_the_guard_on(
        tmp_path: Path) -> None:
    script = write_script(tmp_path, "stable.py", STABLE)
    plain = run_python([script.name], cwd=tmp_path)
    assert plain.returncode == 0, plain.stderr
    cgroup = memory_cgroup(f"torchleak-guard-{os.getpid()}", int(_peak(plain.stdout) * 1.25))
    if cgroup is None:
        pytest.skip("no writable cgroup v1 memory controller on this machine")
    enter = f"echo $$ > {cgroup}/cgroup.procs && exec \"$@\""
    try:
        proc = subprocess.run(["sh", "-c", enter, "sh", sys.executable, "-m", "torchleak",
                               "run", "--guard", "stop", "--out", str(tmp_path / "run"),
                               script.name], cwd=tmp_path, text=True, capture_output=True,
                              timeout=300, env=child_env())
    finally:
        cgroup.rmdir()
    assert proc.returncode == 0 and "done" in proc.stdout, proc.stderr
    assert "GUARD" not in proc.stderr


LEAKY = """
    import torch

    kept = []
    model = torch.nn.Linear(64, 8)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for step in range(1, 1000001):
        loss = model(torch.randn(32, 64)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        kept.append(torch.ones(64 * 1024))
"""


def test_a_killed_runs_report_says_which_tier_the_live_detector_reached(
        tmp_path: Path) -> None:
    import signal
    import time

    script = write_script(tmp_path, "leaky.py", LEAKY)
    out = tmp_path / "run"
    proc = subprocess.Popen([sys.executable, "-m", "torchleak", "run", "--out", str(out),
                             script.name], cwd=tmp_path, env=child_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 240  # generous: the event decides, not the clock
        seen = ""
        while "leak detected" not in seen:
            line = proc.stderr.readline()  # type: ignore[union-attr]
            assert line and time.monotonic() < deadline, seen
            seen += line
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
    report = json.loads(subprocess.run(
        [sys.executable, "-m", "torchleak", "report", str(out), "--format", "json"],
        cwd=tmp_path, env=child_env(), capture_output=True, text=True, check=True).stdout)
    assert report["live"]["tier"] == "called" and report["live"]["calls"][0]["kept"]
    text = subprocess.run([sys.executable, "-m", "torchleak", "report", str(out)],
                          cwd=tmp_path, env=child_env(), capture_output=True, text=True).stdout
    assert "live detector before the run was killed: had called a leak" in text, text


# A program the script starts (a server, a tool) that holds memory while training runs.
HELPER_PROCESS = """
    import subprocess, sys
    import torch

    server = subprocess.Popen([sys.executable, "-c", "import sys, time; data = bytearray("
                               "120 * 2 ** 20); sys.stdin.read()"], stdin=subprocess.PIPE)
    model = torch.nn.Linear(64, 8)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for step in range(300):
        loss = model(torch.randn(32, 64)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    server.stdin.close()
    server.wait()
    print("done")
"""


@prefetch
def helper_process(folder: Path) -> Recorded:
    script = write_script(folder, "helper_process.py", HELPER_PROCESS)
    return record(folder, script, options=("--json", str(folder / "helper.json")))


def test_a_program_the_script_starts_is_not_counted_as_dataloader_workers(
        runs: RunPool) -> None:
    run = runs.get(helper_process)
    assert run.proc.returncode == 0 and "done" in run.proc.stdout, run.proc.stderr
    assert run.scalar("SELECT COUNT(*) FROM process_samples WHERE role = 'worker'") == 0
    report = json.loads((run.out.parent / "helper.json").read_text())
    assert not any("DataLoader workers" in f["culprit"] for f in report["findings"])
