"""The machine checks of ``torchleak doctor``: each measures one thing and says why it
matters for a training run's memory and what to change."""

from __future__ import annotations

import os
import resource
from collections.abc import Callable
from pathlib import Path
from typing import Any

from torchleak.system.allocator import detect_allocator
from torchleak.system.doctor_model import Check, Machine
from torchleak.units import format_bytes as fmt
from torchleak.system.safe import ALLOC_CONF_VARS
from torchleak.system.workers import shm_free

GiB = 1 << 30
SMALL_SHM = 1 * GiB


def check_ram(m: Machine) -> Check:
    total, available = m.memory.ram_total, m.memory.ram_available
    if not total:
        return Check("RAM", "warn", "unknown", "the limit projections fall back to nothing",
                     "run on Linux or install psutil")
    value = f"{fmt(total)} total, {fmt(available or 0)} available"
    why = "a run that outgrows it is killed by the kernel's OOM killer"
    share = (available or 0) / total
    if share < 0.05 or (available or 0) < GiB:
        return Check("RAM", "fail", value, why + "; almost nothing is left before training",
                     "stop what else runs here, or train with a smaller batch or dataset "
                     "in memory", {"total": total, "available": available})
    if share < 0.2:
        return Check("RAM", "warn", value, why + "; other processes hold most of it",
                     "free memory before training (other jobs, notebooks, caches)",
                     {"total": total, "available": available})
    return Check("RAM", "ok", value, why, "", {"total": total, "available": available})


def check_swap(m: Machine) -> Check:
    total, free = m.memory.swap_total or 0, m.memory.swap_free or 0
    data = {"total": total, "free": free}
    if total == 0:
        return Check("swap", "ok", "none", "without swap a leak ends in an OOM kill, with "
                     "no slowdown to warn first", "", data)
    used = total - free
    value = f"{fmt(total)} total, {fmt(used)} in use"
    if used > 0.25 * total:
        return Check("swap", "warn", value, "the machine is already swapping: a training "
                     "step that touches swapped pages runs many times slower",
                     "free memory (other jobs) before training", data)
    return Check("swap", "ok", value, "a leak that reaches swap slows the run to a crawl "
                 "before the OOM kill", "", data)


def check_cgroup(m: Machine) -> Check:
    group = m.cgroup
    if group is None or group.max is None:
        value = "none" if group is None else f"cgroup v{group.version}, no memory limit"
        return Check("cgroup limit", "ok", value, "the limit is the machine's RAM", "",
                     group.to_dict() if group else {})
    file = "memory.max" if group.version == 2 else "memory.limit_in_bytes"
    value = f"{fmt(group.max)} ({file}, cgroup v{group.version})"
    if group.usage is not None:
        value += f", {fmt(group.usage)} in use"
    why = ("the kernel kills the run at this limit, whatever RAM the machine has; "
           "tools that read RAM overestimate the room")
    share = (group.usage or 0) / group.max
    status = "fail" if share > 0.9 else "warn" if share > 0.75 else "ok"
    fix = "" if status == "ok" else "raise the job's memory limit or free memory in the group"
    return Check("cgroup limit", status, value, why, fix, group.to_dict())


def check_memory_high(m: Machine) -> Check | None:
    group = m.cgroup
    if group is None:
        return None
    if group.version == 1:
        if group.soft is None:
            return None
        return Check("cgroup soft limit", "ok", fmt(group.soft), "under memory pressure the "
                     "kernel reclaims this group's pages first beyond it", "",
                     {"soft": group.soft})
    if group.high is None:
        return Check("cgroup memory.high", "ok", "max", "no throttling before the limit", "",
                     {"high": None})
    return Check("cgroup memory.high", "warn", fmt(group.high),
                 "above memory.high the kernel throttles and reclaims this group: training "
                 "slows down long before the kill at memory.max",
                 "raise memory.high to memory.max for the job, or plan the run below it",
                 {"high": group.high})


def check_shm(m: Machine, need: int | None = None, need_text: str = "") -> Check:
    path = Path("/dev/shm")
    free = shm_free()
    if free is None:
        return Check("/dev/shm", "warn", "missing", "DataLoader workers pass batches "
                     "through shared memory", "mount a tmpfs at /dev/shm")
    stat = os.statvfs(path)
    total = stat.f_blocks * stat.f_frsize
    value = f"{fmt(total)} ({fmt(free)} free)"
    why = ("DataLoader workers pass every batch through /dev/shm; when it is full they die "
           "with 'bus error' or 'DataLoader worker killed'")
    fix = ("docker run --shm-size=8g (or --ipc=host); Kubernetes: an emptyDir with "
           "medium: Memory mounted at /dev/shm")
    data = {"total": total, "free": free, "need": need}
    if need is not None and need > free:
        return Check("/dev/shm", "fail", f"{value}; {need_text}", why, fix, data)
    if total < SMALL_SHM:
        return Check("/dev/shm", "warn", value, why, fix, data)
    return Check("/dev/shm", "ok", value + (f"; {need_text}" if need_text else ""), why, "",
                 data)


def _limit_text(value: int) -> str:
    return "unlimited" if value == resource.RLIM_INFINITY else str(value)


def check_open_files(m: Machine) -> Check:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    value = f"{_limit_text(soft)} (hard {_limit_text(hard)})"
    why = ("DataLoader workers share each batch's tensors through file descriptors: a low "
           "limit ends in 'Too many open files'")
    data = {"soft": soft, "hard": hard}
    if soft != resource.RLIM_INFINITY and soft < 4096:
        target = 65536 if hard == resource.RLIM_INFINITY else min(hard, 65536)
        fix = (f"ulimit -n {target}" if target > soft else
               "torch.multiprocessing.set_sharing_strategy('file_system')")
        return Check("open files (ulimit -n)", "warn", value, why, fix, data)
    return Check("open files (ulimit -n)", "ok", value, why, "", data)


def check_processes(m: Machine) -> Check:
    soft, hard = resource.getrlimit(resource.RLIMIT_NPROC)
    value = f"{_limit_text(soft)} (hard {_limit_text(hard)})"
    why = "every DataLoader worker and every thread counts against it"
    data = {"soft": soft, "hard": hard}
    if soft != resource.RLIM_INFINITY and soft < 1024:
        return Check("processes (ulimit -u)", "warn", value, why,
                     f"ulimit -u {_limit_text(hard)}", data)
    return Check("processes (ulimit -u)", "ok", value, why, "", data)


def check_overcommit(m: Machine) -> Check | None:
    try:
        mode = int(Path("/proc/sys/vm/overcommit_memory").read_text())
    except (OSError, ValueError):
        return None
    names = {0: "0 (heuristic)", 1: "1 (always)", 2: "2 (strict accounting)"}
    value = names.get(mode, str(mode))
    if mode == 2:
        return Check("vm.overcommit_memory", "warn", value,
                     "with strict accounting, forking workers from a large process and "
                     "CUDA's large address reservations fail with 'Cannot allocate memory' "
                     "while memory is free", "sysctl -w vm.overcommit_memory=0 (root)",
                     {"mode": mode})
    return Check("vm.overcommit_memory", "ok", value,
                 "forked DataLoader workers share the parent's pages until they write them",
                 "", {"mode": mode})


def check_malloc(m: Machine) -> Check:
    info = detect_allocator()
    settings = ", ".join(f"{k}={v}" for k, v in info.settings.items()) or "no MALLOC_* set"
    version = f" {info.version}" if info.version else ""
    value = f"{info.name}{version} ({info.how}); {settings}"
    if info.is_glibc:
        return Check("malloc", "ok", value,
                     "glibc keeps freed heap pages resident behind small live objects, so "
                     "a process can grow while nothing leaks",
                     "torchleak run --safe trims that slack and caps glibc's arenas",
                     info.to_dict())
    return Check("malloc", "ok", value, f"{info.name} returns freed memory on its own "
                 "schedule; its settings are its own", "", info.to_dict())


def check_gpus(m: Machine) -> Check:
    inventory = m.gpus
    if not inventory.gpus:
        why = "CPU training: the CUDA checks do not apply"
        value = "none" + (f" ({inventory.error})" if inventory.error else
                          "" if inventory.source else " (no nvidia-smi or NVML)")
        return Check("GPU", "ok", value, why, "", inventory.to_dict())
    rows = [f"{g.index}: {g.name}, {fmt(g.total)} total, {fmt(g.free)} free"
            for g in inventory.gpus]
    busy = [g for g in inventory.gpus if g.free < 0.1 * g.total]
    why = "the CUDA limit is each GPU's total; other processes' memory counts against it"
    if busy:
        return Check("GPU", "warn", "; ".join(rows), why + "; some GPUs are nearly full "
                     "before training", "nvidia-smi shows which processes hold them",
                     inventory.to_dict())
    return Check("GPU", "ok", "; ".join(rows), why, "", inventory.to_dict())


def check_alloc_conf(m: Machine) -> Check:
    name, value = next(((n, os.environ[n]) for n in ALLOC_CONF_VARS if n in os.environ),
                       ("PYTORCH_CUDA_ALLOC_CONF", None))
    has_gpu = bool(m.gpus.gpus)
    why = ("expandable_segments:True lets CUDA memory grow in place instead of in fixed "
           "segments that fragment ('reserved but unallocated' OOMs)")
    if value is None:
        fix = "torchleak run --safe sets it (or export PYTORCH_CUDA_ALLOC_CONF=" \
              "expandable_segments:True)" if has_gpu else ""
        return Check(name, "ok", "unset" + ("" if has_gpu else " (no GPU: unused)"), why,
                     fix, {"value": None})
    return Check(name, "ok", value, why, "", {"value": value})


def check_torch(m: Machine) -> Check:
    facts = m.torch
    if facts.get("error"):
        return Check("torch", "fail", facts["error"], "torchleak records torch runs",
                     "pip install torch", facts)
    cuda, cudnn = facts.get("cuda"), facts.get("cudnn")
    value = (f"torch {facts['version']}, CUDA {cuda or 'none (CPU build)'}"
             + (f", cuDNN {cudnn}" if cudnn else ""))
    if m.gpus.gpus and not cuda:
        return Check("torch", "warn", value, "this torch build cannot use the GPUs here",
                     "install a CUDA build of torch (pytorch.org/get-started)", facts)
    return Check("torch", "ok", value, "versions decide which memory tools exist "
                 "(expandable segments need torch >= 2.1)", "", facts)


def torch_facts() -> dict[str, Any]:
    """torch, CUDA and cuDNN versions, without creating a CUDA context. Imports torch."""
    try:
        import torch
    except Exception as err:  # noqa: BLE001 - a broken install is a finding, not a crash
        return {"error": f"torch cannot be imported: {type(err).__name__}: {err}"}
    facts: dict[str, Any] = {"version": torch.__version__, "cuda": torch.version.cuda,
                             "cudnn": None}
    try:
        if torch.backends.cudnn.is_available():
            facts["cudnn"] = torch.backends.cudnn.version()
    except Exception:  # noqa: BLE001 - cuDNN missing or mismatched: leave it unknown
        pass
    return facts


MACHINE_CHECKS: tuple[Callable[[Machine], Check | None], ...] = (
    check_ram, check_swap, check_cgroup, check_memory_high, check_open_files,
    check_processes, check_overcommit, check_malloc, check_gpus, check_alloc_conf,
    check_torch)
