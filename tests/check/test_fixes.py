"""Fix fixtures: ``fixes/<CODE>_in.py`` rewritten by ``--fix`` equals ``<CODE>_out.py``."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from torchleak.check import check_source
from torchleak.check.fixes import apply_fixes

FIXES = Path(__file__).parent / "fixes"
PAIRS = sorted(p.name.split("_")[0] for p in FIXES.glob("*_in.py"))


@pytest.mark.parametrize("code", PAIRS)
def test_fix_output(code: str) -> None:
    source = (FIXES / f"{code}_in.py").read_text(encoding="utf-8")
    fixed, applied = apply_fixes(source, check_source(source, "in.py", select=[code]),
                                 unsafe=True)
    assert applied
    assert fixed == (FIXES / f"{code}_out.py").read_text(encoding="utf-8")


@pytest.mark.parametrize("code", PAIRS)
def test_fixed_output_is_clean(code: str) -> None:
    source = (FIXES / f"{code}_out.py").read_text(encoding="utf-8")
    assert check_source(source, "out.py", select=[code]) == []


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "torchleak", "check", "--isolated", *args],
                          cwd=cwd, capture_output=True, text=True, timeout=120)


def test_cli_fix_writes_and_diff_does_not(tmp_path: Path) -> None:
    shutil.copy(FIXES / "TL101_in.py", tmp_path / "train.py")
    before = (tmp_path / "train.py").read_text()
    diff = _cli("--diff", "--unsafe-fixes", "train.py", cwd=tmp_path)
    assert diff.returncode == 1
    assert "+        total_loss += loss.item()" in diff.stdout
    assert (tmp_path / "train.py").read_text() == before
    safe_only = _cli("--diff", "train.py", cwd=tmp_path)
    assert "total_loss += loss.item()" not in safe_only.stdout  # returned: unsafe
    fixed = _cli("--fix", "--unsafe-fixes", "train.py", cwd=tmp_path)
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    assert (tmp_path / "train.py").read_text() == (FIXES / "TL101_out.py").read_text()
    assert _cli("train.py", cwd=tmp_path).returncode == 0


def test_fix_and_diff_together_is_a_usage_error(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("x = 1\n")
    result = _cli("--fix", "--diff", "a.py", cwd=tmp_path)
    assert result.returncode == 2 and "Traceback" not in result.stderr
