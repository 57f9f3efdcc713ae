"""Which loaded modules are the program's own: the roots a holder walk starts from."""

from __future__ import annotations

import importlib.util
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from torchleak.record.probes.usercode import _scan_user_modules, user_modules


def load(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def names() -> Iterator[list[str]]:
    added: list[str] = []
    yield added
    for name in added:
        sys.modules.pop(name, None)


def found() -> dict[str, ModuleType]:
    return dict(user_modules())


def test_a_module_from_the_users_files_is_found_and_a_librarys_is_not(
        tmp_path: Path, names: list[str]) -> None:
    (tmp_path / "trainer_utils.py").write_text("history = []\n")
    names.append("trainer_utils")
    module = load("trainer_utils", tmp_path / "trainer_utils.py")
    assert found().get("trainer_utils") is module
    assert "json" not in found() and sys.modules["json"] is json


def test_a_module_imported_between_two_scans_is_found_by_the_second(
        tmp_path: Path, names: list[str]) -> None:
    before = found()
    (tmp_path / "late_metrics.py").write_text("cache = {}\n")
    names.append("late_metrics")
    assert "late_metrics" not in before
    module = load("late_metrics", tmp_path / "late_metrics.py")
    assert found().get("late_metrics") is module


def test_a_library_module_replaced_by_a_users_under_its_name_is_looked_at_again(
        tmp_path: Path, names: list[str]) -> None:
    """A scan remembers the modules that were not the user's; one replaced under the same
    name (a reload from another file, a test double) is judged anew."""
    names.append("swapped_module")
    sys.modules["swapped_module"] = json  # a library's module under this name
    assert "swapped_module" not in dict(_scan_user_modules())
    (tmp_path / "swapped_module.py").write_text("buffer = []\n")
    module = load("swapped_module", tmp_path / "swapped_module.py")
    assert dict(_scan_user_modules()).get("swapped_module") is module
