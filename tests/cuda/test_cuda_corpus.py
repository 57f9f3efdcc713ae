"""CUDA leaks and CUDA healthy shapes, recorded on a real GPU.

Skipped where no GPU is present (CI has none): the CPU path of the same code is tested
in tests/record/test_cuda_probe.py beside a faked allocator. Each script is a small real
training loop; the verdict and the named holder are checked as on CPU.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.slow, pytest.mark.skipif(
    not torch.cuda.is_available(), reason="no CUDA device on this machine (CI has none): the "
    "CUDA corpus runs where a GPU is lent")]

PRELUDE = """
    import torch
    import torch.nn.functional as F

    torch.manual_seed(0)
    device = "cuda"
    model = torch.nn.Sequential(torch.nn.Linear(256, 1024), torch.nn.ReLU(),
                                torch.nn.Linear(1024, 10)).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)

    def batch(n=256):
        return torch.randn(n, 256, device=device), torch.randint(0, 10, (n,), device=device)
"""


@dataclass
class Case:
    body: str
    leak: bool
    names: tuple[str, ...] = ()


CASES = {
    "outputs_with_graph": Case("""
        kept = []
        for step in range(300):
            x, y = batch()
            logits = model(x)
            loss = F.cross_entropy(logits, y)
            optimizer.zero_grad(); loss.backward(); optimizer.step()
            kept.append(logits)  # CUDA tensors kept with their graph
    """, True, ("kept",)),
    "cache_keyed_by_step": Case("""
        cache = {}
        for step in range(300):
            x, y = batch()
            loss = F.cross_entropy(model(x), y)
            optimizer.zero_grad(); loss.backward(); optimizer.step()
            cache[step] = torch.empty(256, 1024, device=device)  # 1 MiB a step
    """, True, ("cache",)),
    "growing_optimizer_state": Case("""
        extra = torch.nn.ParameterList()
        for step in range(300):
            if step % 5 == 0:
                extra.append(torch.nn.Parameter(torch.zeros(256, 256, device=device)))
                optimizer.add_param_group({"params": [extra[-1]]})
            x, y = batch()
            loss = F.cross_entropy(model(x), y) + sum(p.sum() for p in extra) * 0
            optimizer.zero_grad(); loss.backward(); optimizer.step()
    """, True, ("param_groups", "state", "extra")),
    "retain_graph_chain": Case("""
        # The chain runs through a gate the optimizer never steps: a chain through the
        # stepped weights fails at the second backward (they changed in place).
        gate = torch.ones(1, device=device, requires_grad=True)
        hidden = torch.zeros(256, 1024, device=device)
        for step in range(300):
            x, y = batch()
            features = model[1](model[0](x)).detach()
            hidden = hidden * 0.5 + gate * features  # never detached: chains across steps
            loss = F.cross_entropy(model(x) + model[2](hidden), y)
            optimizer.zero_grad(); loss.backward(retain_graph=True); optimizer.step()
    """, True, ("hidden",)),
    "pinned_host_buffers": Case("""
        staged = []
        for step in range(300):
            host = torch.randn(256, 1024).pin_memory()  # 1 MiB page-locked, kept
            staged.append(host)
            x = host.to(device, non_blocking=True)[:, :256]
            loss = F.cross_entropy(model(x), torch.randint(0, 10, (256,), device=device))
            optimizer.zero_grad(); loss.backward(); optimizer.step()
    """, True, ("staged",)),
    "reserved_plateau": Case("""
        for step in range(300):
            x, y = batch(256 + (step % 7) * 32)
            loss = F.cross_entropy(model(x), y)
            optimizer.zero_grad(); loss.backward(); optimizer.step()
    """, False),
    "amp_grad_scaler": Case("""
        scaler = torch.amp.GradScaler("cuda")
        for step in range(300):
            x, y = batch()
            with torch.autocast("cuda", dtype=torch.float16):
                loss = F.cross_entropy(model(x), y)
            optimizer.zero_grad(); scaler.scale(loss).backward()
            scaler.step(optimizer); scaler.update()
    """, False),
    "ragged_fragmentation": Case("""
        import random
        random.seed(0)
        for step in range(300):
            x, y = batch(random.choice([64, 96, 160, 224, 288, 352, 416, 480]))
            loss = F.cross_entropy(model(x), y)
            optimizer.zero_grad(); loss.backward(); optimizer.step()
    """, False),
    "empty_cache_sawtooth": Case("""
        for step in range(300):
            x, y = batch()
            loss = F.cross_entropy(model(x), y)
            optimizer.zero_grad(); loss.backward(); optimizer.step()
            if step % 25 == 0:
                torch.cuda.empty_cache()
    """, False),
}
ENV_CASES = {"expandable_segments": ("reserved_plateau",
                                     {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"})}


def _run(tmp_path: Path, name: str, body: str, env: dict[str, str] | None = None) -> dict:
    script = tmp_path / f"{name}.py"
    script.write_text(textwrap.dedent(PRELUDE) + textwrap.dedent(body))
    out = tmp_path / f"{name}.json"
    proc = subprocess.run([sys.executable, "-m", "torchleak", "run", "--quiet", "--out",
                           str(tmp_path / name), "--json", str(out), script.name],
                          cwd=tmp_path, capture_output=True, text=True, timeout=600,
                          env={**os.environ, **(env or {})})
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(out.read_text())


@pytest.mark.parametrize("name", list(CASES))
def test_cuda_case(tmp_path: Path, name: str) -> None:
    case = CASES[name]
    report = _run(tmp_path, name, case.body)
    serious = [f for f in report["findings"] if f["severity"] in ("high", "medium")]
    if case.leak:
        assert report["verdict"] == "leak", report
        assert any(any(n in f["culprit"] for n in case.names) for f in serious), serious
    else:
        assert report["verdict"] == "no_leak" and not serious, report


@pytest.mark.parametrize("name", list(ENV_CASES))
def test_cuda_case_with_environment(tmp_path: Path, name: str) -> None:
    base, env = ENV_CASES[name]
    report = _run(tmp_path, name, CASES[base].body, env)
    assert report["verdict"] == "no_leak", report


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two GPUs")
def test_a_program_on_gpu_1_gets_no_context_on_gpu_0(tmp_path: Path) -> None:
    """torchleak probes only the devices the program uses: no context on the others."""
    body = """
        import subprocess, os
        for step in range(60):
            x, y = batch()
            loss = F.cross_entropy(model(x), y)
            optimizer.zero_grad(); loss.backward(); optimizer.step()
        print("PID", os.getpid())
        print(subprocess.run(["nvidia-smi", "--query-compute-apps=pid,gpu_uuid",
                              "--format=csv,noheader"], capture_output=True, text=True).stdout)
    """
    script = tmp_path / "gpu1.py"
    script.write_text(textwrap.dedent(PRELUDE.replace('device = "cuda"', 'device = "cuda:1"'))
                      + textwrap.dedent(body))
    uuids = subprocess.run(["nvidia-smi", "--query-gpu=index,uuid", "--format=csv,noheader"],
                           capture_output=True, text=True, check=True).stdout
    gpu0 = next(line.split(",")[1].strip() for line in uuids.splitlines()
                if line.startswith("0"))
    proc = subprocess.run([sys.executable, "-m", "torchleak", "run", "--quiet", "--out",
                           str(tmp_path / "run"), script.name], cwd=tmp_path,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    pid = next(line.split()[1] for line in proc.stdout.splitlines() if line.startswith("PID "))
    contexts = [line.split(",") for line in proc.stdout.splitlines() if "," in line]
    on_gpu0 = [c for c in contexts if c[0].strip() == pid and c[1].strip() == gpu0]
    assert not on_gpu0, proc.stdout
