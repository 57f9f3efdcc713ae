"""Speak while the run is alive: a warning while training goes on, the guard that saves
the run before the limit, and a diagnosis that survives ``kill -9``."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from recordkit import (Recorded, RunPool, child_env, prefetch, record, run_torchleak, weight,
                       write_script)

from torchleak.errors import EXIT_GUARD

pytestmark = pytest.mark.slow
MIB = 1024 * 1024

# ~1 MiB kept per step, the step printed every 20 steps, a checkpoint function for the guard.
LEAKY = """
    import atexit
    import resource
    import sys

    import torch
    import torchleak


    @torchleak.on_guard
    def save_checkpoint(event):
        torch.save({"model": model.state_dict(), "step": event.step}, "checkpoint.pt")
        print("checkpoint saved at step", event.step, flush=True)


    atexit.register(lambda: print("peak", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
                                  flush=True))
    torch.manual_seed(0)
    model = torch.nn.Linear(64, 8)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    kept = []
    for step in range(1, int(sys.argv[1]) + 1):
        loss = model(torch.randn(32, 64)).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        kept.append(torch.ones(256 * 1024))  # 1 MiB a step, never released
        if step % 20 == 0:
            print("step", step, flush=True)
"""

HEALTHY = LEAKY.replace("kept.append(torch.ones(256 * 1024))", "kept = [torch.ones(256 * 1024)]")


def _start_rss() -> int:
    """What a process holds once torch is imported: the base the limit is set above."""
    out = subprocess.run([sys.executable, "-c", "import resource, torch; print(resource."
                          "getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)"],
                         capture_output=True, text=True, check=True)
    return int(out.stdout)


@prefetch
@weight(3)
def warned(folder: Path) -> Recorded:
    script = write_script(folder, "leaky.py", LEAKY)
    return record(folder, script, "600")


def test_the_warning_comes_while_training_goes_on(runs: RunPool) -> None:
    run = runs.get(warned)
    assert run.proc.returncode == 0, run.proc.stderr
    assert "step 600" in run.proc.stdout  # the run went on to its end
    err = run.proc.stderr
    assert "torchleak: leak detected at step" in err, err
    warning = err.split("torchleak: leak detected at step")[1]
    assert "global kept in leaky.py" in warning and "fix:" in warning and "OOM" in warning
    # Called once warm-up cannot explain the growth: it kept its pace while the run doubled
    # (never before step 160), and well before the end of the 600-step run.
    at = int(warning.split()[0].replace(",", ""))
    assert 160 <= at < 300, warning


@prefetch
@weight(3)
def guarded(folder: Path) -> tuple[Recorded, int]:
    limit = _start_rss() + 400 * MIB
    script = write_script(folder, "leaky.py", LEAKY)
    return record(folder, script, "2000", options=("--limit", str(limit), "--guard", "stop")), limit


def test_the_guard_saves_a_checkpoint_and_stops_before_the_limit(runs: RunPool) -> None:
    run, limit = runs.get(guarded)
    out = run.proc.stdout
    assert run.proc.returncode == EXIT_GUARD, run.proc.stderr
    assert "checkpoint saved at step" in out and (run.out.parent / "checkpoint.pt").exists()
    assert "step 2000" not in out  # ended before its last step
    peak = int(out.split("peak")[1].split()[0])
    assert peak < limit, (peak, limit)
    assert "GUARD at step" in run.proc.stderr and "stopping" in run.proc.stderr
    assert run.meta("status") == "stopped"
    report = json.loads(run_torchleak(["report", str(run.out), "--format", "json"],
                                      cwd=run.out.parent).stdout)
    assert report["guard"]["mode"] == "stop" and "stopped" in report["guard"]["actions"]
    assert any("save_checkpoint" in a for a in report["guard"]["actions"])
    assert report["findings"][0]["culprit"].startswith("global kept in leaky.py")
    text = run_torchleak(["report", str(run.out)], cwd=run.out.parent).stdout
    assert "The guard stopped the run at step" in text


def test_a_killed_run_keeps_its_diagnosis(tmp_path: Path) -> None:
    script = write_script(tmp_path, "leaky.py", LEAKY)
    out = tmp_path / "run"
    proc = subprocess.Popen([sys.executable, "-m", "torchleak", "run", "--out", str(out),
                             script.name, "100000"], cwd=tmp_path, env=child_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 90
        seen = ""
        while "leak detected" not in seen:
            line = proc.stderr.readline()  # type: ignore[union-attr]
            assert line and time.monotonic() < deadline, seen
            seen += line
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    report = json.loads(run_torchleak(["report", str(out), "--format", "json"],
                                      cwd=tmp_path).stdout)
    assert report["run"]["status"].startswith("killed") and report["verdict"] == "leak"
    top = report["findings"][0]
    assert top["culprit"].startswith("global kept in leaky.py") and "clear `kept`" in top["fix"]


@prefetch
def healthy_guarded(folder: Path) -> Recorded:
    script = write_script(folder, "healthy.py", HEALTHY)
    return record(folder, script, "600", options=("--guard", "stop"))


def test_a_healthy_run_is_never_stopped(runs: RunPool) -> None:
    run = runs.get(healthy_guarded)
    assert run.proc.returncode == 0 and "step 600" in run.proc.stdout, run.proc.stderr
    assert "GUARD" not in run.proc.stderr and run.meta("guard") is None


@prefetch
def far_from_the_limit(folder: Path) -> Recorded:
    # 64 KiB a step of fast steps: 8 GiB is ~130,000 steps (minutes) away, far past what
    # 600 steps can tell.
    script = write_script(folder, "slow.py", LEAKY.replace("256 * 1024", "16 * 1024"))
    return record(folder, script, "600", options=("--limit", "8GiB", "--guard", "stop"))


def test_a_projection_far_past_the_steps_seen_does_not_stop_the_run(runs: RunPool) -> None:
    run = runs.get(far_from_the_limit)
    assert run.proc.returncode == 0 and "step 600" in run.proc.stdout, run.proc.stderr
    assert "leak detected" in run.proc.stderr  # it is a leak, and said so
    assert "GUARD" not in run.proc.stderr and run.meta("guard") is None
