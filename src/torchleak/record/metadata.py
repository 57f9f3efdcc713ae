"""Run metadata: what ran, where, and against which memory limits."""

from __future__ import annotations

import os
import platform
import socket
import sys
from typing import Any

import psutil

from torchleak.version import __version__


def cgroup_memory_limit() -> int | None:
    """The cgroup (v2 or v1) memory limit of this process, None when unlimited."""
    from torchleak.system.limits import cgroup_memory_limit as limit

    return limit()


def run_metadata(argv: list[str], script: str, name: str, budget_pct: float) -> dict[str, Any]:
    """What is known before the program imports torch (torchleak never imports it first)."""
    return {
        "name": name,
        "script": script,
        "argv": argv,
        "cwd": os.getcwd(),
        "pid": os.getpid(),
        "hostname": socket.gethostname(),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "ram_total": psutil.virtual_memory().total,
        "swap_total": psutil.swap_memory().total,
        "cgroup_limit": cgroup_memory_limit(),
        "alloc_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF"),
        "budget_pct": budget_pct,
        "torchleak_version": __version__,
    }


def torch_metadata() -> dict[str, Any]:
    """What is known once the program has imported torch."""
    import torch

    return {"torch": torch.__version__, "devices": ["cpu"]}
