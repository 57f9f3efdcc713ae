"""``--safe`` on real training loops: memory flat where glibc pins freed heap, and the
printed results bitwise identical, with the settings applied at the top of the script."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from torchleak.analysis.stats import theil_sen
from torchleak.system.trim import DEFAULT_GROW_BYTES

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not (hasattr(os, "confstr") and os.confstr("CS_GNU_LIBC_VERSION")),
                       reason="the allocator settings are glibc's"),
]

PRELUDE = """
import os
if os.environ.get("TORCHLEAK_TEST_SAFE") == "1":
    from torchleak.system.safe import apply_safe
    apply_safe(verbose=True)
"""

# An MLP step that keeps a detached tensor every step: the kept tensors are tiny (a loss
# is 4 bytes, the logits 5 KB), but glibc places them between the step's freed
# activations and gradients, so the heap cannot reuse or return those pages.
RETENTION_LOOP = PRELUDE + """
import sys
import torch

def uss():
    values = {}
    with open("/proc/self/smaps_rollup") as fh:
        for line in fh.read().splitlines()[1:]:
            name, _, rest = line.partition(":")
            values[name] = int(rest.split()[0]) * 1024
    return values["Private_Clean"] + values["Private_Dirty"]

keep, steps = sys.argv[1], int(sys.argv[2])
torch.manual_seed(0)
torch.set_num_threads(1)
model = torch.nn.Sequential(torch.nn.Linear(64, 1024), torch.nn.ReLU(),
                            torch.nn.Linear(1024, 1024), torch.nn.ReLU(),
                            torch.nn.Linear(1024, 10))
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
x, y = torch.randn(128, 64), torch.randint(0, 10, (128,))
history = []
for step in range(1, steps + 1):
    logits = model(x)
    loss = torch.nn.functional.cross_entropy(logits, y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    history.append(loss.detach() if keep == "loss" else logits.detach())
    if step % 25 == 12:  # off the recorder's census steps (100, 200, 400, ...)
        print(f"step {step} uss {uss()} loss {loss.item()!r}", flush=True)
if os.environ.get("TORCHLEAK_TEST_SAFE") == "1":
    from torchleak.system.safe import slack_trimmer
    trimmer = slack_trimmer()
    print("trimmer", trimmer and (trimmer.state.to_dict(), trimmer.error), file=sys.stderr)
"""

HEALTHY_LOOP = PRELUDE + """
import torch

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.Tanh(), torch.nn.Linear(64, 1))
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
data = torch.utils.data.TensorDataset(torch.randn(2048, 32), torch.randn(2048, 1))
loader = torch.utils.data.DataLoader(data, batch_size=64, shuffle=True)
for epoch in range(3):
    total = 0.0
    for x, y in loader:
        loss = torch.nn.functional.mse_loss(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        total += loss.item()
    print(f"epoch {epoch} loss {total!r}")
print("weights", [p.sum().item() for p in model.parameters()])
raise SystemExit(3)
"""


def _run_all(commands: list[tuple[list[str], str]]) -> list[subprocess.CompletedProcess[str]]:
    """Run the commands side by side (``TORCHLEAK_TEST_SAFE`` set as given) and wait for
    all: their imports overlap, and every core is used."""
    procs = []
    for argv, safe in commands:
        env = dict(os.environ, TORCHLEAK_TEST_SAFE=safe, OMP_NUM_THREADS="1")
        procs.append(subprocess.Popen(argv, env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True))
    results = []
    for proc in procs:
        out, err = proc.communicate(timeout=600)
        results.append(subprocess.CompletedProcess(proc.args, proc.returncode, out, err))
    return results


def _run_both(script: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], ...]:
    """The script plain and under --safe settings, side by side."""
    argv = [sys.executable, str(script), *args]
    return tuple(_run_all([(argv, "0"), (argv, "1")]))


def _uss_and_losses(out: str) -> tuple[list[tuple[int, int]], list[str]]:
    rows = [line.split() for line in out.splitlines() if line.startswith("step ")]
    return [(int(r[1]), int(r[3])) for r in rows], [r[5] for r in rows]


def _slope(points: list[tuple[int, int]]) -> float:
    """USS bytes per step, as the median of the slopes between every two readings
    (Theil-Sen): the trimmer polls the heap every 0.1 s on a thread of its own, and on a
    busy machine one of its trims comes a poll or two late; a least-squares fit follows
    that one reading, the median of the pairs does not."""
    return theil_sen([float(step) for step, _ in points], [float(uss) for _, uss in points])


@pytest.fixture(scope="module")
def retention_script(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("safe") / "keep_detached.py"
    path.write_text(RETENTION_LOOP)
    return path


@pytest.fixture(scope="module")
def logits_runs(retention_script: Path, tmp_path_factory: pytest.TempPathFactory
                ) -> tuple[dict[str, subprocess.CompletedProcess[str]], Path]:
    """The kept-logits loop plain, with the settings applied in the script, under
    `torchleak run --safe` and under a plain `torchleak run`, all four side by side; the
    tests below share them (the plain run is the baseline of two of them)."""
    folder = tmp_path_factory.mktemp("safe-cli")
    script = [str(retention_script), "logits"]
    run = [sys.executable, "-m", "torchleak", "run"]
    names = ["plain", "safe", "cli_safe", "cli_plain"]
    results = _run_all([
        ([sys.executable, *script, "500"], "0"),
        ([sys.executable, *script, "500"], "1"),
        ([*run, "--safe", "--out", str(folder / "run"), "--json", str(folder / "safe.json"),
          *script, "500"], "0"),
        ([*run, "--quiet", "--out", str(folder / "plain-run"), "--json",
          str(folder / "plain.json"), *script, "60"], "0")])
    return dict(zip(names, results)), folder


def _retention(script: Path, keep: str,
               runs: dict[str, subprocess.CompletedProcess[str]] | None = None
               ) -> tuple[float, float, str]:
    """(plain USS slope, safe USS slope, the safe run's stderr); losses must match."""
    plain, safe = (runs["plain"], runs["safe"]) if runs else _run_both(script, keep, "500")
    assert plain.returncode == 0 and safe.returncode == 0, plain.stderr + safe.stderr
    plain_uss, plain_losses = _uss_and_losses(plain.stdout)
    safe_uss, safe_losses = _uss_and_losses(safe.stdout)
    assert safe_losses == plain_losses and len(plain_losses) == 20
    assert "torchleak" not in plain.stderr
    # From step 100 on: the first steps are the allocator's warm-up in both runs.
    return _slope(plain_uss[3:]), _slope(safe_uss[3:]), safe.stderr


def test_kept_logits_loop_is_flat_under_safe_with_identical_losses(
        retention_script: Path, logits_runs: tuple[dict, Path]) -> None:
    plain_slope, safe_slope, safe_stderr = _retention(retention_script, "logits",
                                                      logits_runs[0])
    assert plain_slope > 150 * 1024, f"plain grew only {plain_slope / 1024:.0f} KB/step"
    # Without the settings it is all of it.
    assert abs(safe_slope) <= 0.10 * plain_slope, (
        f"safe {safe_slope / 1024:.1f} KB/step vs plain {plain_slope / 1024:.1f}")
    start_lines = [line for line in safe_stderr.splitlines()
                   if line.startswith("torchleak --safe:")]
    assert any("MALLOC_ARENA_MAX=4 (was unset)" in line for line in start_lines)
    assert any("malloc_trim(0)" in line for line in start_lines)


def _floor_rise(points: list[tuple[int, int]]) -> tuple[int, float]:
    """(USS bytes, steps) between the lowest reading of the first half and that of the
    second: what the process still held. Memory kept raises the second half's lowest; a
    trim's saw-tooth moves it by at most what grows between two trims."""
    half = len(points) // 2
    first, second = points[:half], points[half:]
    lowest = [min(uss for _, uss in part) for part in (first, second)]
    middle = [sum(step for step, _ in part) / len(part) for part in (first, second)]
    return lowest[1] - lowest[0], middle[1] - middle[0]


def test_kept_loss_loop_stays_flat_under_safe_with_identical_losses(
        retention_script: Path) -> None:
    # How much the plain run grows here depends on where glibc places each 4-byte loss
    # (from ~15 to ~670 KB/step between runs); under --safe what it keeps stays flat
    # whatever glibc does. Allowed: 10% of plain's growth, and two trims' worth of the
    # saw-tooth (the trimmer trims once the free heap grew by 8 MiB; a loaded machine
    # lets it look less often, so one half's lowest reading may come a trim late).
    plain, safe = _run_both(retention_script, "loss", "500")
    plain_slope, _, _ = _retention(retention_script, "loss", {"plain": plain, "safe": safe})
    rise, steps = _floor_rise(_uss_and_losses(safe.stdout)[0][3:])
    allowed = 0.10 * plain_slope * steps + 2 * DEFAULT_GROW_BYTES
    assert rise <= allowed, (
        f"safe kept {rise / 2**20:.1f} MiB over {steps:.0f} steps (allowed {allowed / 2**20:.1f}; "
        f"plain grew {plain_slope / 1024:.1f} KB/step); {safe.stdout[-1500:]} {safe.stderr[-600:]}")


def test_healthy_run_keeps_its_output_and_exit_code(tmp_path: Path) -> None:
    script = tmp_path / "healthy.py"
    script.write_text(HEALTHY_LOOP)
    plain, safe = _run_both(script)
    assert plain.returncode == safe.returncode == 3
    assert safe.stdout == plain.stdout and "weights" in plain.stdout
    assert safe.stderr.startswith("torchleak --safe:")


def test_torchleak_run_safe_applies_it_prints_it_and_reports_it(
        logits_runs: tuple[dict[str, subprocess.CompletedProcess[str]], Path]) -> None:
    """The same proof through the command users type: `torchleak run --safe`."""
    import json

    runs, folder = logits_runs
    plain, safe = runs["plain"], runs["cli_safe"]
    assert plain.returncode == safe.returncode == 0, safe.stderr
    plain_uss, plain_losses = _uss_and_losses(plain.stdout)
    safe_uss, safe_losses = _uss_and_losses(safe.stdout)
    assert safe_losses == plain_losses
    assert abs(_slope(safe_uss[3:])) <= 0.10 * _slope(plain_uss[3:])
    lines = [line for line in safe.stderr.splitlines() if line.startswith("torchleak --safe:")]
    assert any("MALLOC_ARENA_MAX" in line for line in lines), safe.stderr
    report = json.loads((folder / "safe.json").read_text())
    settings = {s["setting"]: s for s in report["safe"]}
    assert settings["MALLOC_ARENA_MAX"] == {"setting": "MALLOC_ARENA_MAX", "value": "4",
                                            "was": None}
    assert settings["malloc_trim(0)"].get("saved_bytes", 0) > 0  # what the trims gave back
    unsafe = runs["cli_plain"]
    assert unsafe.returncode == 0 and json.loads((folder / "plain.json").read_text())["safe"] == []
