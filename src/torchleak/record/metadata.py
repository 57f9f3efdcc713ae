"""Run metadata: what ran, where, and against which memory limits."""

from __future__ import annotations

import os
import platform
import socket
import sys
from pathlib import Path
from typing import Any

import psutil
import torch

from torchleak.record.probes.cuda import gpu_totals


def cgroup_memory_limit() -> int | None:
    """The cgroup (v2 or v1) memory limit of this process, None when unlimited."""
    from torchleak.system.limits import cgroup_memory_limit as limit

    return limit()


def run_metadata(argv: list[str], script: str, name: str, budget_pct: float) -> dict[str, Any]:
    gpus = gpu_totals()
    return {
        "name": name,
        "script": script,
        "argv": argv,
        "cwd": os.getcwd(),
        "pid": os.getpid(),
        "hostname": socket.gethostname(),
        "python": sys.version.split()[0],
        "torch": torch.__version__,
        "platform": platform.platform(),
        "devices": ["cpu"] + [f"cuda:{g['device']}" for g in gpus],
        "ram_total": psutil.virtual_memory().total,
        "cgroup_limit": cgroup_memory_limit(),
        "gpu_totals": gpus,
        "alloc_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF"),
        "budget_pct": budget_pct,
    }
