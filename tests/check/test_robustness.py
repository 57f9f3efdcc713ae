"""Bad input never crashes the checker: each file gets a clear diagnostic instead."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from torchleak.check import check_paths, check_source

SAMPLE = (Path(__file__).parent / "fixtures" / "TL102.py").read_text(encoding="utf-8")


def test_syntax_error_is_tl002() -> None:
    [d] = check_source("def f(:\n    pass\n", "bad.py")
    assert d.code == "TL002" and d.line == 1


def test_tree_with_bad_files(tmp_path: Path) -> None:
    (tmp_path / "bin.py").write_bytes(b"\xff\xfe\x00garbage\x80\x81")
    (tmp_path / "latin.py").write_bytes(b"# -*- coding: latin-1 -*-\nname = '\xe9'\n")
    (tmp_path / "bad.py").write_text("for x in :\n")
    (tmp_path / "ok.py").write_text("x = 1\n")
    (tmp_path / "nb.ipynb").write_text("{not json")
    (tmp_path / "loop").mkdir()
    os.symlink(tmp_path, tmp_path / "loop" / "back")  # a symlink loop
    os.symlink(tmp_path / "missing.py", tmp_path / "dangling.py")
    for skipped in (".git", ".venv", "site-packages", "__pycache__", "node_modules"):
        (tmp_path / skipped).mkdir()
        (tmp_path / skipped / "leak.py").write_text("all = []\nfor b in loader:\n"
                                                    "    all.append(model(b))\n")
    diags = check_paths([str(tmp_path)], jobs=1)
    codes = {Path(d.path).name: d.code for d in diags}
    assert codes == {"bin.py": "TL001", "bad.py": "TL002", "nb.ipynb": "TL003",
                     "dangling.py": "TL001"}


@pytest.mark.skipif(os.geteuid() == 0, reason="root can read anything")
def test_unreadable_file(tmp_path: Path) -> None:
    path = tmp_path / "secret.py"
    path.write_text("x = 1\n")
    path.chmod(0)
    [d] = check_paths([str(path)])
    assert d.code == "TL001" and "ermission" in d.message


def test_huge_and_deep_inputs() -> None:
    assert check_source("x = 1\n" * 200_000) == []
    deep = "x = " + "(" * 150 + "1" + ")" * 150 + "\n"
    assert all(d.code == "TL002" for d in check_source(deep))
    nested = "".join("    " * i + f"if x{i}:\n" for i in range(90)) + "    " * 90 + "pass\n"
    assert all(d.code == "TL002" for d in check_source(nested))


def test_cli_survives_garbage(tmp_path: Path) -> None:
    (tmp_path / "x.py").write_bytes(os.urandom(4096))
    result = subprocess.run([sys.executable, "-m", "torchleak", "check", "--isolated", "x.py"],
                            cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert result.returncode == 1 and "Traceback" not in result.stderr


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=2000))
def test_fuzz_random_bytes(data: bytes) -> None:
    text = data.decode("utf-8", "replace")
    for d in check_source(text, "fuzz.py", select=["ALL"]):
        assert d.code != "TL000", d.message


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.integers(0, len(SAMPLE) - 1), st.integers(0, 30),
                          st.sampled_from(["", "(", ")", ":", "\n", "    ", "loss", ".append(",
                                           "for x in loader:\n", "with torch.no_grad():\n",
                                           "self.", "+=", "def f(self):\n", "'", "\\"])),
                max_size=8))
def test_fuzz_mutated_python(edits: list[tuple[int, int, str]]) -> None:
    text = SAMPLE
    for at, cut, insert in edits:
        text = text[:at] + insert + text[at + cut:]
    for d in check_source(text, "mutant.py", select=["ALL"]):
        assert d.code != "TL000", d.message
        assert d.line >= 1 and d.col >= 1
    check_source(text, "mutant.ipynb")
