"""When a growing signal reaches its real limit.

The limit is the user's ``--limit`` when set, else the cgroup's memory limit, else RAM
(host memory signals), or the device's total (CUDA). The projection uses the signal's
whole measured growth (every finding on it together: the process dies when the total
reaches the limit) and the median step time.
"""

from __future__ import annotations

from torchleak.analysis.series import RunData
from torchleak.report import OomProjection
from torchleak.vocab import Signal as S


def memory_limit(data: RunData, signal: str) -> tuple[int, str] | None:
    if signal.startswith("cuda"):
        if data.cuda_total:
            return int(data.cuda_total), "cuda:0 total"
        return None
    user = data.meta.get("limit")
    if isinstance(user, dict) and isinstance(user.get("bytes"), int):
        return int(user["bytes"]), str(user.get("name") or "--limit")
    cgroup = data.meta.get("cgroup_limit")
    ram = data.meta.get("ram_total")
    if isinstance(cgroup, int) and (not isinstance(ram, int) or cgroup < ram):
        return cgroup, "cgroup memory.max"
    if isinstance(ram, int):
        return ram, "RAM"
    return None


def host_usage(data: RunData) -> float:
    """What counts against a host limit now: the main process and its workers."""
    return data.current(S.MAIN_USS) + data.current(S.WORKERS_USS)


def project(data: RunData, signal: str, bytes_per_step: float | None) -> OomProjection | None:
    limit = memory_limit(data, signal)
    if limit is None:
        return None
    limit_bytes, name = limit
    current = data.current(signal) if signal.startswith("cuda") else host_usage(data)
    steps = seconds = None
    if bytes_per_step is not None and bytes_per_step > 0:
        steps = max(0.0, (limit_bytes - current) / bytes_per_step)
        if data.step_seconds:
            seconds = steps * data.step_seconds
    return OomProjection(limit_bytes, name, int(current), steps, seconds, at_step=data.steps,
                         bytes_per_step=bytes_per_step)
