"""Project when a growing signal reaches its real limit."""

from __future__ import annotations

from torchleak.report import OomProjection
from torchleak.analysis.series import RunData


def memory_limit(data: RunData, signal: str) -> tuple[int, str] | None:
    if signal.startswith("cuda"):
        if data.cuda_total:
            return int(data.cuda_total), "cuda:0 total"
        return None
    cgroup = data.meta.get("cgroup_limit")
    ram = data.meta.get("ram_total")
    if cgroup and (not ram or cgroup < ram):
        return int(cgroup), "cgroup memory.max"
    if ram:
        return int(ram), "RAM"
    return None


def project(data: RunData, signal: str, current: float, bytes_per_step: float) -> OomProjection | None:
    limit = memory_limit(data, signal)
    if limit is None:
        return None
    limit_bytes, name = limit
    steps = None
    seconds = None
    if bytes_per_step > 0:
        steps = max(0.0, (limit_bytes - current) / bytes_per_step)
        if data.step_seconds:
            seconds = steps * data.step_seconds
    return OomProjection(limit_bytes, name, int(current), steps, seconds)
