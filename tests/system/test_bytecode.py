"""torchleak keeps its own compiled bytecode where the environment turns writing it off,
and leaves the program's modules as the environment says."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from torchleak.system.bytecode import PACKAGE

SCRIPT = """
import helper
print(helper.VALUE)
"""


def _copy_package(tmp_path: Path) -> Path:
    site = tmp_path / "site"
    shutil.copytree(PACKAGE, site / "torchleak",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    return site


def _run(site: Path, folder: Path, *args: str, dont_write: bool = True
         ) -> subprocess.CompletedProcess[str]:
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(site), "HOME": str(folder)}
    if dont_write:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    return subprocess.run([sys.executable, "-m", "torchleak", *args], cwd=folder, env=env,
                          capture_output=True, text=True, timeout=300)


def test_own_bytecode_is_written_and_the_programs_is_not(tmp_path: Path) -> None:
    site = _copy_package(tmp_path)
    work = tmp_path / "work"
    work.mkdir()
    (work / "helper.py").write_text("VALUE = 42\n")
    (work / "train.py").write_text(SCRIPT)
    run = _run(site, work, "run", "--quiet", "--out", str(work / "run"), "train.py")
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "42"
    cached = {p.name.split(".")[0] for p in site.glob("torchleak/**/__pycache__/*.pyc")}
    sources = {p.stem for p in site.glob("torchleak/**/*.py")}
    assert cached == sources  # every module of ours, once
    assert not (work / "__pycache__").exists()  # the program's helper: as the env says


def test_nothing_is_compiled_when_python_writes_bytecode_itself(tmp_path: Path) -> None:
    site = _copy_package(tmp_path)
    run = _run(site, tmp_path, "--version", dont_write=False)
    assert run.returncode == 0, run.stderr
    cached = list(site.glob("torchleak/**/__pycache__/*.pyc"))
    # Python wrote what the command imported, and nothing else: no compile of the rest.
    assert cached and len(cached) < len(list(site.glob("torchleak/**/*.py")))
