"""What --safe plans and applies, and what it leaves alone."""

from __future__ import annotations

import os
import sys

import pytest

from torchleak.errors import UsageError
from torchleak.system import safe
from torchleak.system.allocator import detect_allocator
from torchleak.system.safe import SafeChange, apply_safe, plan_safe

needs_glibc = pytest.mark.skipif(not detect_allocator().is_glibc, reason="glibc settings")


def _by_setting(changes: list[SafeChange]) -> dict[str, SafeChange]:
    return {c.setting: c for c in changes}


@needs_glibc
def test_default_plan_on_this_machine() -> None:
    plan = _by_setting(plan_safe(environ={}))
    assert plan["MALLOC_ARENA_MAX"] == SafeChange(
        "MALLOC_ARENA_MAX", "4", None, plan["MALLOC_ARENA_MAX"].why)
    assert plan["malloc_trim(0)"].was == "never"
    assert "MALLOC_MMAP_THRESHOLD_" not in plan  # costs step time: opt-in only
    assert not any(c.setting.startswith("DataLoader") for c in plan.values())


@needs_glibc
def test_mmap_mode_adds_the_fixed_thresholds() -> None:
    plan = _by_setting(plan_safe("mmap", environ={}))
    assert plan["MALLOC_MMAP_THRESHOLD_"].value == "65536"
    assert plan["MALLOC_TRIM_THRESHOLD_"].value == str(1 << 20)


@needs_glibc
def test_user_settings_are_kept_never_overridden() -> None:
    env = {"MALLOC_ARENA_MAX": "16", "MALLOC_MMAP_THRESHOLD_": "131072",
           "PYTORCH_CUDA_ALLOC_CONF": "max_split_size_mb:128"}
    plan = _by_setting(plan_safe("mmap", environ=env))
    for name, value in env.items():
        assert plan[name].kept and plan[name].value == plan[name].was == value
        assert plan[name].line() == f"torchleak --safe: {name}={value} kept (set by you)"
    before = dict(env)
    applied = apply_safe(environ=env, start_trimmer=False)  # no mallopt: all kept
    assert env == before
    assert {c.setting for c in applied if c.kept} == {"MALLOC_ARENA_MAX",
                                                      "PYTORCH_CUDA_ALLOC_CONF"}


@needs_glibc
def test_arena_max_set_through_glibc_tunables_is_kept() -> None:
    plan = _by_setting(plan_safe(environ={"GLIBC_TUNABLES": "glibc.malloc.arena_max=2"}))
    assert plan["MALLOC_ARENA_MAX"].kept and plan["MALLOC_ARENA_MAX"].value == "2"


def test_apply_exports_for_workers_and_reports_lines(python) -> None:  # noqa: ANN001
    out = python("""
        import os, subprocess, sys
        from torchleak.system.safe import apply_safe, slack_trimmer
        applied = apply_safe(verbose=True)
        child = subprocess.run([sys.executable, "-c",
                                "import os; print(os.environ.get('MALLOC_ARENA_MAX'))"],
                               capture_output=True, text=True)
        print(child.stdout.strip(), slack_trimmer() is not None and slack_trimmer().running,
              [c.to_dict() for c in applied][0])
    """, unset=("MALLOC_ARENA_MAX", "GLIBC_TUNABLES", "LD_PRELOAD"))
    assert out.returncode == 0, out.stderr
    if not detect_allocator().is_glibc:
        assert out.stderr == ""
        return
    assert out.stdout.strip() == ("4 True {'setting': 'MALLOC_ARENA_MAX', 'value': '4', "
                                  "'was': None}")
    lines = out.stderr.splitlines()
    assert lines[0].startswith("torchleak --safe: MALLOC_ARENA_MAX=4 (was unset): ")
    assert lines[1].startswith("torchleak --safe: malloc_trim(0)=when the free heap grows")


def test_unknown_mode_is_one_usage_line() -> None:
    with pytest.raises(UsageError, match=r"unknown --safe mode 'fast': use default, "
                                         r"workers, mmap"):
        plan_safe("fast")


def test_to_dict_is_the_report_shape() -> None:
    change = SafeChange("MALLOC_ARENA_MAX", "4", None, "why")
    assert change.to_dict() == {"setting": "MALLOC_ARENA_MAX", "value": "4", "was": None}


@pytest.fixture
def torch_not_imported(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(sys.modules, "torch", raising=False)


def test_expandable_segments_where_a_cuda_torch_and_gpu_exist(
        monkeypatch: pytest.MonkeyPatch, torch_not_imported: None) -> None:
    # No GPU here: the two facts a GPU machine would give are stood in for.
    monkeypatch.setattr(safe, "_nvidia_gpu_present", lambda: True)
    monkeypatch.setattr(safe, "torch_version", lambda: "2.5.1+cu121")
    plan = _by_setting(plan_safe(environ={}))
    assert plan["PYTORCH_CUDA_ALLOC_CONF"] == SafeChange(
        "PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True", None,
        plan["PYTORCH_CUDA_ALLOC_CONF"].why)
    cuda_only = [c for c in plan.values() if c.setting == "PYTORCH_CUDA_ALLOC_CONF"]
    env: dict[str, str] = {}
    apply_safe(changes=cuda_only, environ=env)
    assert env == {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}
    # the newer name of the variable counts as the user's setting too
    plan = _by_setting(plan_safe(environ={"PYTORCH_ALLOC_CONF": "backend:native"}))
    assert plan["PYTORCH_ALLOC_CONF"].kept and "PYTORCH_CUDA_ALLOC_CONF" not in plan


@pytest.mark.parametrize(("version", "gpu", "imported", "reason"), [
    ("2.13.0+cpu", True, False, "not a CUDA build"),
    ("2.0.1", True, False, "predates expandable segments"),
    ("2.5.1+cu121", False, False, "no NVIDIA GPU"),
    ("2.5.1+cu121", True, True, "already imported"),
])
def test_expandable_segments_is_not_set_where_it_cannot_work(
        monkeypatch: pytest.MonkeyPatch, torch_not_imported: None, version: str, gpu: bool,
        imported: bool, reason: str) -> None:
    monkeypatch.setattr(safe, "_nvidia_gpu_present", lambda: gpu)
    monkeypatch.setattr(safe, "torch_version", lambda: version)
    if imported:
        monkeypatch.setitem(sys.modules, "torch", object())
    assert reason in (safe.expandable_segments_blocker({}) or "")
    assert "PYTORCH_CUDA_ALLOC_CONF" not in _by_setting(plan_safe(environ={}))


@pytest.mark.skipif(os.path.exists("/dev/nvidia0"), reason="this machine has a GPU")
def test_a_machine_without_gpu_gets_no_cuda_setting() -> None:
    assert "PYTORCH_CUDA_ALLOC_CONF" not in _by_setting(plan_safe(environ={}))
    assert "GPU" in (safe.expandable_segments_blocker({}) or "") or "torch" in (
        safe.expandable_segments_blocker({}) or "")


def test_planning_again_after_apply_reports_torchleaks_own_change(python) -> None:  # noqa: ANN001
    out = python("""
        from torchleak.system.safe import apply_safe, plan_safe
        apply_safe(start_trimmer=False)
        again = {c.setting: c for c in plan_safe()}
        print(again["MALLOC_ARENA_MAX"].kept, again["MALLOC_ARENA_MAX"].was)
    """, unset=("MALLOC_ARENA_MAX", "GLIBC_TUNABLES", "LD_PRELOAD"))
    assert out.returncode == 0, out.stderr
    if detect_allocator().is_glibc:
        assert out.stdout.split() == ["False", "None"]
