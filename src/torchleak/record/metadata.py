"""Run metadata: what ran, where, and against which memory limits."""

from __future__ import annotations

import os
import platform
import socket
import sys
from pathlib import Path
from typing import Any

import psutil


def cgroup_memory_limit() -> int | None:
    """The cgroup (v2 or v1) memory limit of this process, None when unlimited."""
    candidates = [Path("/sys/fs/cgroup/memory.max"),
                  Path("/sys/fs/cgroup/memory/memory.limit_in_bytes")]
    try:
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            rel = line.split(":", 2)[-1].lstrip("/")
            if rel:
                candidates.insert(0, Path("/sys/fs/cgroup") / rel / "memory.max")
    except OSError:
        pass
    for path in candidates:
        try:
            text = path.read_text().strip()
        except OSError:
            continue
        if text and text != "max":
            value = int(text)
            if value < (1 << 60):  # v1 reports "unlimited" as a huge number
                return value
    return None


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
        "torchleak_version": _version(),
    }


def torch_metadata() -> dict[str, Any]:
    """What is known once the program has imported torch."""
    import torch

    return {"torch": torch.__version__, "devices": ["cpu"]}


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("torchleak")
    except PackageNotFoundError:
        return "unknown"
