"""The memory limit: sizes, cgroup v1 on this machine, cgroup v2 from a mounted tree."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from torchleak.errors import UsageError
from torchleak.system.limits import (
    cgroup_memory,
    machine_memory,
    memory_limit,
    parse_size,
)


@pytest.mark.parametrize(("text", "expected"), [
    ("12 GiB", 12 * 2**30), ("12gib", 12 * 2**30), ("12 GiB", 12 * 2**30),
    ("800MB", 800 * 10**6), ("800 MiB", 800 * 2**20), ("800M", 800 * 2**20),
    ("1.5G", int(1.5 * 2**30)), ("1.5GB", int(1.5 * 10**9)), (".5T", 2**39),
    ("2 TiB", 2 * 2**40), ("4096K", 4096 * 1024), ("12884901888", 12884901888),
    ("12884901888B", 12884901888), (12884901888, 12884901888),
])
def test_parse_size_reads_every_form(text: str | int, expected: int) -> None:
    assert parse_size(text) == expected


@pytest.mark.parametrize(("text", "says"), [
    ("", "cannot read"), ("abc", "cannot read"), ("-1G", "cannot read"),
    ("1e9", "cannot read"), ("inf", "cannot read"), ("12 G B", "cannot read"),
    ("1.5X", "unknown unit 'X'"), ("3 apples", "unknown unit"),
    ("12", "did you mean 12GiB"), ("0G", "less than 1 MiB"), ("1023 KiB", "less than 1 MiB"),
])
def test_parse_size_rejects_bad_input_with_one_line(text: str, says: str) -> None:
    with pytest.raises(UsageError) as info:
        parse_size(text)
    message = str(info.value)
    assert says in message
    assert "\n" not in message
    assert info.value.exit_code == 64


@pytest.mark.parametrize("size", [2**20, 3 * 2**30, int(1.5 * 2**30), 12 * 2**40])
def test_a_printed_size_is_read_back_by_parse_size(size: int) -> None:
    from torchleak.units import format_bytes

    assert parse_size(format_bytes(size)) == size


def test_machine_memory_matches_sysconf() -> None:
    ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    memory = machine_memory()
    assert memory.ram_total is not None
    assert abs(memory.ram_total - ram) < 64 * 2**20
    assert memory.ram_available is not None and 0 < memory.ram_available <= memory.ram_total
    assert memory.swap_total is not None and memory.swap_total >= 0


def test_user_limit_wins_when_lower_and_keeps_its_spelling() -> None:
    limit = memory_limit("800MB")
    assert limit is not None
    assert (limit.bytes, limit.name) == (800 * 10**6, "--limit 800MB")
    machine = memory_limit(2**60)  # the machine's own limit is lower than 1 EiB
    assert machine is not None and machine.bytes < 2**60
    assert machine.name in ("RAM", "cgroup memory.max", "cgroup memory.limit_in_bytes")


def _own_v1_memory_dir() -> Path | None:
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if "memory" in controllers.split(","):
            folder = Path("/sys/fs/cgroup/memory") / path.lstrip("/")
            return folder if (folder / "memory.limit_in_bytes").exists() else None
    return None


@pytest.fixture
def v1_child_groups() -> tuple[Path, Path]:
    """A parent memory cgroup (limit 300 MB) with an unlimited child, under our own."""
    own = _own_v1_memory_dir() if sys.platform.startswith("linux") else None
    if own is None:
        pytest.skip("no cgroup v1 memory hierarchy here")
    parent = own / f"torchleak-test-{uuid.uuid4().hex[:8]}"
    try:
        parent.mkdir()
        (parent / "memory.limit_in_bytes").write_text("300000000")
        (parent / "child").mkdir()
    except OSError as err:
        if parent.exists():
            parent.rmdir()
        pytest.skip(f"cannot create a memory cgroup here ({err.strerror}): needs root and "
                    "a writable cgroup v1 hierarchy")
    yield parent, parent / "child"
    for folder in (parent / "child", parent):
        try:
            folder.rmdir()
        except OSError:
            pass


def test_cgroup_v1_limit_of_an_ancestor_is_read(v1_child_groups: tuple[Path, Path]) -> None:
    parent, child = v1_child_groups
    code = ("from torchleak.system.limits import cgroup_memory, memory_limit\n"
            "g = cgroup_memory(); m = memory_limit()\n"
            "print(g.version, g.path, g.max, g.max_path, m.bytes, m.name, sep='|')\n")
    # The shell moves itself into the child group, then becomes Python.
    script = f'echo $$ > "{child}/cgroup.procs" && exec "{sys.executable}" -c "$0"'
    out = subprocess.run(["sh", "-c", script, code], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    version, path, limit, where, effective, name = out.stdout.strip().split("|")
    page = os.sysconf("SC_PAGE_SIZE")
    assert (version, path, where) == ("1", str(child), str(parent))
    assert int(limit) == 300000000 // page * page  # the kernel rounds to pages
    assert (int(effective), name) == (int(limit), "cgroup memory.limit_in_bytes")


def _v2_tree(tmp: Path, files: dict[str, str], namespace_root: str = "/") -> Path:
    """A cgroup2 hierarchy mounted at tmp/cg, and a /proc/self with its mountinfo."""
    for rel, text in files.items():
        path = tmp / "cg" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    proc = tmp / "proc"
    proc.mkdir()
    (proc / "mountinfo").write_text(
        f"30 23 0:26 {namespace_root} {tmp / 'cg'} rw,nosuid - cgroup2 cgroup2 rw\n"
        "31 23 0:27 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu\n")
    (proc / "cgroup").write_text("0::/batch.slice/job-7/step\n")
    return proc


def test_cgroup_v2_smallest_limit_on_the_path_wins(tmp_path: Path) -> None:
    # This machine has no v2 memory controller: the hierarchy is laid out as the kernel does.
    proc = _v2_tree(tmp_path, {
        "memory.max": "max\n",
        "batch.slice/memory.max": "max\n",
        "batch.slice/job-7/memory.max": "8589934592\n",
        "batch.slice/job-7/memory.high": "7516192768\n",
        "batch.slice/job-7/step/memory.max": "max\n",
        "batch.slice/job-7/step/memory.high": "max\n",
        "batch.slice/job-7/step/memory.swap.max": "0\n",
        "batch.slice/job-7/step/memory.current": "123456789\n",
    })
    group = cgroup_memory(proc)
    assert group is not None
    assert group.version == 2
    assert group.path == str(tmp_path / "cg/batch.slice/job-7/step")
    assert group.max_path == str(tmp_path / "cg/batch.slice/job-7")
    assert (group.max, group.high, group.swap_max, group.usage) == (
        8589934592, 7516192768, 0, 123456789)


def test_cgroup_v2_inside_a_namespace_reads_the_mount_root(tmp_path: Path) -> None:
    # In a container the mount shows only our subtree: /proc/self/cgroup's path is not
    # below it, so the mount point itself is this process's group.
    proc = _v2_tree(tmp_path, {"memory.max": "4294967296\n", "memory.high": "max\n"},
                    namespace_root="/batch.slice/job-7/step")
    group = cgroup_memory(proc)
    assert group is not None and group.max == 4294967296 and group.high is None


def test_cgroup_v2_without_memory_controller_is_ignored(tmp_path: Path) -> None:
    proc = _v2_tree(tmp_path, {"cgroup.controllers": "hugetlb\n"})
    assert cgroup_memory(proc) is None
