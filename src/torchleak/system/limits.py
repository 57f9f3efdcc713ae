"""The real memory limit of this process: cgroup (v1 and v2), RAM, swap, or the user's.

A process inside a container or a batch job dies at its cgroup's limit, not at the
machine's RAM. cgroup limits are hierarchical: the smallest ``memory.max`` (v2) or
``memory.limit_in_bytes`` (v1) on the path from this process's cgroup up to the root of
the mounted hierarchy is the one that applies, so every level is read.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from torchleak.errors import UsageError
from torchleak.units import format_bytes, parse_bytes

# cgroup v1 reports "no limit" as LONG_MAX rounded down to a page (9223372036854771712).
_UNLIMITED = 1 << 60

_PROC_SELF = Path("/proc/self")


@dataclass(frozen=True)
class CgroupMemory:
    """What the memory cgroup of this process allows. Byte fields are None when unset."""

    version: int  # 1 or 2
    path: str  # this process's cgroup folder
    max: int | None  # the hard limit: the smallest on the path to the root
    max_path: str | None  # the folder that sets it
    high: int | None  # v2 memory.high: above it the kernel throttles and reclaims
    soft: int | None  # v1 memory.soft_limit_in_bytes: reclaimed first under pressure
    swap_max: int | None  # swap the cgroup may use on top of ``max``
    usage: int | None  # memory.current / memory.usage_in_bytes

    def to_dict(self) -> dict[str, object]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class MemoryLimit:
    """The limit projections and the guard should use, and where it comes from."""

    bytes: int
    name: str  # "--limit 12GiB", "cgroup memory.max", "cgroup memory.limit_in_bytes", "RAM"
    cgroup: str | None = None  # the cgroup folder that sets it: the kernel counts its usage
    cgroup_version: int = 0

    def to_dict(self) -> dict[str, object]:
        return {"bytes": self.bytes, "name": self.name}


def cgroup_working_set(folder: str, version: int) -> int | None:
    """What a cgroup's limit is enforced on, less the file cache the kernel reclaims
    before it kills: usage minus inactive file pages (what container runtimes call the
    working set). None when it cannot be read."""
    base = Path(folder)
    usage = _read_int(base / ("memory.current" if version == 2 else "memory.usage_in_bytes"))
    if usage is None:
        return None
    key = "inactive_file" if version == 2 else "total_inactive_file"
    inactive = 0
    try:
        for line in (base / "memory.stat").read_text().splitlines():
            name, _, value = line.partition(" ")
            if name == key and value.strip().isdigit():
                inactive = int(value)
                break
    except OSError:
        pass
    return max(0, usage - inactive)


def _read_int(path: Path) -> int | None:
    """A cgroup value file: a byte count, or None for "max"/unlimited/unreadable."""
    try:
        text = path.read_text().strip()
    except (OSError, ValueError):
        return None
    if not text or text == "max":
        return None
    try:
        value = int(text)
    except ValueError:
        return None
    return value if 0 <= value < _UNLIMITED else None


def _smallest(values: list[tuple[int | None, Path]]) -> tuple[int | None, Path | None]:
    known = [(v, p) for v, p in values if v is not None]
    return min(known, key=lambda item: item[0]) if known else (None, None)


@dataclass(frozen=True)
class _Mount:
    root: str  # the part of the hierarchy this mount shows ("/" unless namespaced)
    point: Path
    version: int


def _memory_mounts(mountinfo: str) -> list[_Mount]:
    """cgroup2 mounts and cgroup v1 mounts carrying the memory controller."""
    mounts = []
    for line in mountinfo.splitlines():
        left, sep, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        if not sep or len(fields) < 5 or len(tail) < 3:
            continue
        point = Path(fields[4].replace("\\040", " "))
        if tail[0] == "cgroup2":
            mounts.append(_Mount(fields[3], point, 2))
        elif tail[0] == "cgroup" and "memory" in tail[2].split(","):
            mounts.append(_Mount(fields[3], point, 1))
    return mounts


def _own_paths(cgroup_text: str) -> dict[int, str]:
    """This process's cgroup path in the v1 memory hierarchy (key 1) and in v2 (key 2)."""
    paths: dict[int, str] = {}
    for line in cgroup_text.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        hierarchy, controllers, path = parts
        if hierarchy == "0" and controllers == "":
            paths[2] = path
        elif "memory" in controllers.split(","):
            paths[1] = path
    return paths


def _cgroup_dir(mount: _Mount, own: str) -> Path:
    """The folder of ``own`` under ``mount``; the mount itself inside a cgroup namespace."""
    rel = own
    if mount.root != "/" and (own == mount.root or own.startswith(mount.root + "/")):
        rel = own[len(mount.root):]
    folder = mount.point / rel.lstrip("/")
    return folder if folder.is_dir() else mount.point


def _ancestors(folder: Path, top: Path) -> list[Path]:
    """``folder`` and its parents up to and including ``top``."""
    chain = [folder]
    while folder != top and top in folder.parents:
        folder = folder.parent
        chain.append(folder)
    return chain


def _read_v2(folder: Path, top: Path) -> CgroupMemory | None:
    chain = _ancestors(folder, top)
    if not any((p / "memory.max").exists() for p in chain):
        return None  # a v2 hierarchy without the memory controller
    max_value, max_path = _smallest([(_read_int(p / "memory.max"), p) for p in chain])
    high, _ = _smallest([(_read_int(p / "memory.high"), p) for p in chain])
    swap, _ = _smallest([(_read_int(p / "memory.swap.max"), p) for p in chain])
    return CgroupMemory(2, str(folder), max_value, str(max_path) if max_path else None,
                        high, None, swap, _read_int(folder / "memory.current"))


def _read_v1(folder: Path, top: Path) -> CgroupMemory | None:
    chain = _ancestors(folder, top)
    if not (folder / "memory.limit_in_bytes").exists():
        return None
    max_value, max_path = _smallest([(_read_int(p / "memory.limit_in_bytes"), p)
                                     for p in chain])
    soft, _ = _smallest([(_read_int(p / "memory.soft_limit_in_bytes"), p) for p in chain])
    memsw, _ = _smallest([(_read_int(p / "memory.memsw.limit_in_bytes"), p) for p in chain])
    swap = memsw - max_value if memsw is not None and max_value is not None else None
    return CgroupMemory(1, str(folder), max_value, str(max_path) if max_path else None,
                        None, soft, swap, _read_int(folder / "memory.usage_in_bytes"))


def cgroup_memory(proc_self: Path = _PROC_SELF) -> CgroupMemory | None:
    """The memory cgroup of this process (v2 preferred when it has the memory controller),
    None when there is none or it cannot be read. ``proc_self`` is for tests."""
    try:
        mountinfo = (proc_self / "mountinfo").read_text()
        own = _own_paths((proc_self / "cgroup").read_text())
    except OSError:
        return None
    mounts = _memory_mounts(mountinfo)
    for version, reader in ((2, _read_v2), (1, _read_v1)):
        for mount in (m for m in mounts if m.version == version):
            if version not in own:
                continue
            try:
                found = reader(_cgroup_dir(mount, own[version]), mount.point)
            except OSError:
                found = None
            if found is not None:
                return found
    return None


def cgroup_memory_limit() -> int | None:
    """The cgroup (v2 or v1) hard memory limit of this process, None when unlimited."""
    found = cgroup_memory()
    return found.max if found is not None else None


def _meminfo() -> dict[str, int]:
    values: dict[str, int] = {}
    try:
        text = Path("/proc/meminfo").read_text()
    except OSError:
        return values
    for line in text.splitlines():
        name, _, rest = line.partition(":")
        parts = rest.split()
        if parts and parts[0].isdigit():
            values[name] = int(parts[0]) * (1024 if parts[1:] == ["kB"] else 1)
    return values


@dataclass(frozen=True)
class MachineMemory:
    ram_total: int | None
    ram_available: int | None
    swap_total: int | None
    swap_free: int | None

    def to_dict(self) -> dict[str, object]:
        return dict(self.__dict__)


def machine_memory() -> MachineMemory:
    """RAM and swap of the machine (``/proc/meminfo``, psutil elsewhere)."""
    info = _meminfo()
    if "MemTotal" in info:
        return MachineMemory(info["MemTotal"], info.get("MemAvailable"),
                             info.get("SwapTotal"), info.get("SwapFree"))
    try:
        import psutil

        ram, swap = psutil.virtual_memory(), psutil.swap_memory()
        return MachineMemory(ram.total, ram.available, swap.total, swap.free)
    except Exception:  # noqa: BLE001 - an unknown platform: say nothing rather than fail
        return MachineMemory(None, None, None, None)


def memory_limit(user_limit: int | str | None = None) -> MemoryLimit | None:
    """The effective limit: the smallest of the cgroup's, RAM and the user's ``--limit``.

    Swap is not added: a leak that reaches swap slows the run to a crawl long before the
    swap is full. None only when nothing at all can be read.
    """
    candidates: list[MemoryLimit] = []
    if user_limit is not None:
        size = parse_size(user_limit)
        shown = user_limit.strip() if isinstance(user_limit, str) else format_bytes(size)
        candidates.append(MemoryLimit(size, f"--limit {shown}"))
    group = cgroup_memory()
    if group is not None and group.max is not None:
        file = "memory.max" if group.version == 2 else "memory.limit_in_bytes"
        candidates.append(MemoryLimit(group.max, f"cgroup {file}", group.max_path or group.path,
                                      group.version))
    ram = machine_memory().ram_total
    if ram:
        candidates.append(MemoryLimit(ram, "RAM"))
    return min(candidates, key=lambda limit: limit.bytes) if candidates else None


def parse_size(text: str | int) -> int:
    """Bytes of a memory limit from ``"12GiB"``, ``"800MB"``, ``"1.5G"`` or ``"12884901888"``.

    Read by ``torchleak.units.parse_bytes``; a limit under 1 MiB is refused as a
    missing unit. Raises ``UsageError`` with one line saying what is accepted.
    """
    size = parse_bytes(text)
    if size < _SMALLEST_LIMIT:
        bare = isinstance(text, int) or (isinstance(text, str) and text.strip().isdigit())
        hint = f" (did you mean {str(text).strip()}GiB?)" if bare else ""
        raise UsageError(f"{text!r} is less than 1 MiB, too small for a memory limit{hint}")
    return size


_SMALLEST_LIMIT = 1 << 20


def page_size() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):
        return 4096
