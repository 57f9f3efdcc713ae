"""``--safe``: settings that cannot change what a training run computes, only how much
memory it keeps.

- ``MALLOC_ARENA_MAX``: glibc otherwise creates up to 8 heaps per core, each keeping its
  own freed memory; a handful is enough for a training process and its loader threads.
  Set with ``mallopt`` here and exported, so spawned DataLoader workers read it at start
  (forked ones inherit the setting).
- heap slack trimming: ``malloc_trim(0)`` from a background thread when glibc's free heap
  grows, on a time budget (see ``torchleak.system.trim``).
- ``PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True`` against CUDA fragmentation, only
  where it can take effect: torch not yet imported, a CUDA build of torch >= 2.1, an
  NVIDIA GPU present, and the user set nothing.
- mode ``"mmap"`` (opt-in): a fixed 64 KiB mmap threshold, so large blocks never enter
  the heap; flat memory without a trimming thread, but each large block is mapped and
  zeroed anew (measured: up to 1.4x the step time of a step with MB-sized tensors).
- mode ``"workers"`` (opt-in, may change speed and the randomness of augmentations in
  workers): DataLoader ``num_workers`` capped to what memory holds and
  ``persistent_workers`` off; see ``torchleak.system.workers``.

A setting the user already made is never overridden: it is reported as kept.
"""

from __future__ import annotations

import os
import sys
from collections.abc import MutableMapping
from typing import TextIO

from torchleak.errors import UsageError
from torchleak.system.allocator import (
    M_ARENA_MAX,
    M_MMAP_THRESHOLD,
    M_TRIM_THRESHOLD,
    detect_allocator,
    mallopt,
)
from torchleak.system.safe_change import SafeChange
from torchleak.system.trim import DEFAULT_GROW_BYTES, SlackState, SlackTrimmer

MODES = ("default", "workers", "mmap")
ARENA_MAX = 4
MMAP_THRESHOLD = 64 << 10
TRIM_THRESHOLD = 1 << 20
EXPANDABLE = "expandable_segments:True"
ALLOC_CONF_VARS = ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF")
TRIM_SETTING = "malloc_trim(0)"


def parse_mode(mode: str) -> set[str]:
    parts = {p.strip() for p in (mode or "default").split(",") if p.strip()}
    unknown = parts - set(MODES)
    if unknown:
        raise UsageError(f"unknown --safe mode {', '.join(sorted(unknown))!r}: "
                         f"use {', '.join(MODES)} (comma-separated to combine)")
    return parts | {"default"}


# Variables apply_safe set in this process, with the value they replaced: planning again
# later must not mistake torchleak's own setting for the user's.
_SET_HERE: dict[str, tuple[str, str | None]] = {}


def _env_change(env: MutableMapping[str, str], name: str, value: str,
                why: str) -> SafeChange:
    ours = _SET_HERE.get(name)
    if ours is not None and env.get(name) == ours[0]:
        return SafeChange(name, ours[0], ours[1], why)
    if name in env:
        return SafeChange(name, env[name], env[name], why, kept=True)
    return SafeChange(name, value, None, why)


def _tunable_set(env: MutableMapping[str, str], tunable: str) -> str | None:
    """A glibc tunable set through ``GLIBC_TUNABLES`` (``glibc.malloc.arena_max=2:...``)."""
    for item in env.get("GLIBC_TUNABLES", "").split(":"):
        name, _, value = item.partition("=")
        if name == tunable:
            return value
    return None


def _glibc_changes(env: MutableMapping[str, str], parts: set[str]) -> list[SafeChange]:
    if not detect_allocator(dict(env)).is_glibc:
        return []  # jemalloc, tcmalloc, musl, macOS: their own rules
    arena = _tunable_set(env, "glibc.malloc.arena_max")
    changes = [SafeChange("MALLOC_ARENA_MAX", arena, arena, kept=True) if arena else
               _env_change(env, "MALLOC_ARENA_MAX", str(ARENA_MAX),
                           "fewer glibc heaps, each keeping its own freed memory")]
    if "mmap" in parts:
        changes.append(_env_change(env, "MALLOC_MMAP_THRESHOLD_", str(MMAP_THRESHOLD),
                                   "large blocks are mapped and returned at free, "
                                   "never pinned in the heap"))
        changes.append(_env_change(env, "MALLOC_TRIM_THRESHOLD_", str(TRIM_THRESHOLD),
                                   "the heap top is returned once 1 MiB is free"))
    changes.append(SafeChange(TRIM_SETTING,
                              f"when the free heap grows by {DEFAULT_GROW_BYTES >> 20} MiB",
                              "never", "freed heap pages kept behind live objects go back "
                              "to the system (a background thread, its time capped at 5%)"))
    return changes


def _nvidia_gpu_present() -> bool:
    """An NVIDIA GPU visible to this process, found without touching CUDA."""
    if os.environ.get("CUDA_VISIBLE_DEVICES", None) in ("", "-1"):
        return False
    try:
        return bool(os.listdir("/proc/driver/nvidia/gpus"))
    except OSError:
        return os.path.exists("/dev/nvidia0")


def torch_version() -> str | None:
    """The installed torch's version, read from its metadata (torch is not imported)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("torch")
    except PackageNotFoundError:
        return None


def _version_at_least(text: str, wanted: tuple[int, int]) -> bool:
    numbers = []
    for piece in text.split("+")[0].split(".")[:2]:
        digits = "".join(c for c in piece if c.isdigit())
        numbers.append(int(digits) if digits else 0)
    return tuple(numbers) >= wanted


def expandable_segments_blocker(env: MutableMapping[str, str]) -> str | None:
    """Why ``expandable_segments`` cannot be set here, None when it can."""
    if "torch" in sys.modules:
        return "torch is already imported (set before torch is imported)"
    version = torch_version()
    if version is None:
        return "torch is not installed"
    if "+cpu" in version or "+rocm" in version:
        return f"torch {version} is not a CUDA build"
    if not _version_at_least(version, (2, 1)):
        return f"torch {version} predates expandable segments (2.1)"
    if not _nvidia_gpu_present():
        return "no NVIDIA GPU here"
    return None


def _cuda_changes(env: MutableMapping[str, str]) -> list[SafeChange]:
    why = "CUDA memory grows in place instead of fragmenting into fixed segments"
    for name in ALLOC_CONF_VARS:
        if name in env:
            return [SafeChange(name, env[name], env[name], why, kept=True)]
    if expandable_segments_blocker(env) is not None:
        return []
    return [SafeChange("PYTORCH_CUDA_ALLOC_CONF", EXPANDABLE, None, why)]


def plan_safe(mode: str = "default",
              environ: MutableMapping[str, str] | None = None) -> list[SafeChange]:
    """What ``--safe`` would change here (nothing is changed). ``mode`` is ``default``,
    ``workers`` or ``mmap``, or a comma-separated combination."""
    parts = parse_mode(mode)
    env = os.environ if environ is None else environ
    changes = _glibc_changes(env, parts) + _cuda_changes(env)
    if "workers" in parts:
        from torchleak.system.workers import plan_worker_caps

        changes += plan_worker_caps().changes()
    return changes


_MALLOPT = {"MALLOC_ARENA_MAX": M_ARENA_MAX, "MALLOC_MMAP_THRESHOLD_": M_MMAP_THRESHOLD,
            "MALLOC_TRIM_THRESHOLD_": M_TRIM_THRESHOLD}
_TRIMMER: list[SlackTrimmer] = []


def _apply_one(change: SafeChange, env: MutableMapping[str, str],
               start_trimmer: bool) -> bool:
    if change.setting == TRIM_SETTING:
        if start_trimmer and not any(t.running for t in _TRIMMER):
            _TRIMMER.append(SlackTrimmer(SlackState()).start())
        return True
    if change.setting in _MALLOPT:
        if not mallopt(_MALLOPT[change.setting], int(change.value)):
            return False
    if change.setting.isupper():  # an environment variable: exported for workers
        if env is os.environ:
            _SET_HERE[change.setting] = (change.value, change.was)
        env[change.setting] = change.value
    return True


def apply_safe(mode: str = "default", *, changes: list[SafeChange] | None = None,
               environ: MutableMapping[str, str] | None = None, start_trimmer: bool = True,
               verbose: bool = False, stream: TextIO | None = None) -> list[SafeChange]:
    """Apply ``changes`` (default: ``plan_safe(mode)``) and return those in force, kept
    ones included. DataLoader caps are not applied here (``cap_dataloaders`` does).

    ``start_trimmer=False`` leaves heap trimming to the caller, who then calls
    ``trim_if_slack`` off the training thread. With ``verbose`` one line per change is
    printed on ``stream`` (stderr). Never raises on a setting that fails: it is left out.
    """
    env = os.environ if environ is None else environ
    planned = plan_safe(mode, env) if changes is None else changes
    applied = []
    for change in planned:
        if change.setting.startswith("DataLoader"):
            continue
        try:
            ok = change.kept or _apply_one(change, env, start_trimmer)
        except (OSError, ValueError):
            ok = False
        if ok:
            applied.append(change)
    if verbose:
        for change in applied:
            print(change.line(), file=stream or sys.stderr)
    return applied


def slack_trimmer() -> SlackTrimmer | None:
    """The trimming thread ``apply_safe`` started, if any (its ``state`` has the figures)."""
    return _TRIMMER[-1] if _TRIMMER else None


def stop_trimmer() -> None:
    for trimmer in _TRIMMER:
        trimmer.stop()
    _TRIMMER.clear()

