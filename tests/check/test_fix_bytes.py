"""``--fix`` never damages a file: encoding, BOM, newline style and every byte outside the
edit stay as they were; positions follow ``ast``; nothing unverifiable is written; odd
paths (FIFOs, devices, link loops) get one line, never a hang or an internal error."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from torchleak.check import fixes as fixes_module

BODY = ("def train(model, loader, optimizer):{nl}"
        "    history = []{nl}"
        "    for x in loader:{nl}"
        "        loss = model(x).mean(){nl}"
        "        loss.backward(){nl}"
        "        optimizer.step(){nl}"
        "        history.append(loss){nl}"
        "    print(sum(history)){nl}")


def _fix(tmp_path: Path, data: bytes, *extra: str, name: str = "train.py"
         ) -> subprocess.CompletedProcess[str]:
    (tmp_path / name).write_bytes(data)
    return subprocess.run([sys.executable, "-m", "torchleak", "check", "--isolated",
                           "--fix", *extra, name], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120)


def _expect_only_insert(before: bytes, after: bytes, marker: bytes, inserted: bytes) -> None:
    at = before.index(marker) + len(marker)
    assert after == before[:at] + inserted + before[at:]


@pytest.mark.parametrize("newline", ["\n", "\r\n", "\r"])
def test_newline_style_is_kept(tmp_path: Path, newline: str) -> None:
    before = BODY.format(nl=newline).encode()
    result = _fix(tmp_path, before)
    after = (tmp_path / "train.py").read_bytes()
    _expect_only_insert(before, after, b"history.append(loss", b".item()")
    assert result.returncode == 0, result.stdout + result.stderr


def test_declared_latin1_encoding_is_kept(tmp_path: Path) -> None:
    before = ("# -*- coding: latin-1 -*-\n# été\n" + BODY.format(nl="\n")
              + "label = 'été'\n").encode("latin-1")
    _fix(tmp_path, before)
    after = (tmp_path / "train.py").read_bytes()
    _expect_only_insert(before, after, b"history.append(loss", b".item()")
    assert b"\xe9t\xe9" in after and "été".encode() not in after


def test_bom_is_kept(tmp_path: Path) -> None:
    before = b"\xef\xbb\xbf" + BODY.format(nl="\r\n").encode()
    _fix(tmp_path, before)
    after = (tmp_path / "train.py").read_bytes()
    assert after.startswith(b"\xef\xbb\xbfdef train")
    _expect_only_insert(before, after, b"history.append(loss", b".item()")


@pytest.mark.parametrize("odd", ["\u2028", "\u2029", "\x85", "\x0c", "\x1c", "\x0b"])
def test_unicode_line_separators_do_not_shift_the_fix(tmp_path: Path, odd: str) -> None:
    """Python ends lines only at CR/LF; ``str.splitlines`` would also split at these."""
    text = BODY.format(nl="\n").replace(
        "    history = []\n", f"    history = []  # note{odd}more\n    s = 'a{odd}b'\n")
    if odd == "\x0c":
        text = text.replace("    for x", "\x0c    for x")
    before = text.encode()
    _fix(tmp_path, before)
    after = (tmp_path / "train.py").read_bytes()
    _expect_only_insert(before, after, b"history.append(loss", b".item()")
    assert b"loss.backward().item()" not in after


def test_inserted_lines_use_the_file_newline(tmp_path: Path) -> None:
    source = ("import matplotlib.pyplot as plt\r\n\r\n\r\n"
              "def plots(epochs):\r\n"
              "    for epoch in epochs:\r\n"
              "        fig = plt.figure()\r\n"
              "        plt.plot(epoch)\r\n"
              "        fig.savefig('x.png')\r\n")
    before = source.encode()
    _fix(tmp_path, before)
    after = (tmp_path / "train.py").read_bytes()
    assert after == before + b"        plt.close(fig)\r\n" or \
        after == before[:-2] + b"\r\n        plt.close(fig)\r\n"
    assert b"\n" not in after.replace(b"\r\n", b"")


def test_unverifiable_fix_is_not_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                         ) -> None:
    from torchleak.check import runner
    from torchleak.check.files import Candidate

    path = tmp_path / "train.py"
    before = BODY.format(nl="\n").encode()
    path.write_bytes(before)

    def broken(source, diagnostics, unsafe=False):  # noqa: ANN001, ANN202
        fixed, applied = real(source, diagnostics, unsafe)
        return fixed.replace("def train(", "def train((", 1), applied

    real = fixes_module.apply_fixes
    monkeypatch.setattr(runner, "apply_fixes", broken)
    result = runner.check_file(Candidate(str(path)), runner.FileSettings(), "safe")
    assert result.fixed_source is None and "did not check out" in result.fix_error
    assert runner.write_fix(result) is None
    assert path.read_bytes() == before


def test_file_changed_while_checked_is_not_overwritten(tmp_path: Path) -> None:
    from torchleak.check import runner
    from torchleak.check.files import Candidate

    path = tmp_path / "train.py"
    path.write_bytes(BODY.format(nl="\n").encode())
    result = runner.check_file(Candidate(str(path)), runner.FileSettings(), "safe")
    path.write_text("x = 1\n")
    assert "changed while" in (runner.write_fix(result) or "")
    assert path.read_text() == "x = 1\n"


def test_fix_through_a_symlink_keeps_the_link_and_mode(tmp_path: Path) -> None:
    real = tmp_path / "real.py"
    real.write_bytes(BODY.format(nl="\n").encode())
    real.chmod(0o640)
    (tmp_path / "link.py").symlink_to(real)
    _fix(tmp_path, real.read_bytes(), name="real.py")  # prime: same content
    real.write_bytes(BODY.format(nl="\n").encode())
    subprocess.run([sys.executable, "-m", "torchleak", "check", "--isolated", "--fix",
                    "link.py"], cwd=tmp_path, capture_output=True, timeout=120)
    assert (tmp_path / "link.py").is_symlink()
    assert b".item()" in real.read_bytes() and (real.stat().st_mode & 0o777) == 0o640


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_fifo_and_device_are_refused_without_blocking(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe.py")
    result = subprocess.run([sys.executable, "-m", "torchleak", "check", "--isolated",
                             "--fix", "pipe.py", "/dev/null"], cwd=tmp_path,
                            capture_output=True, text=True, timeout=60)
    assert "pipe.py:1:1: TL001 cannot read: not a regular file (a named pipe)" in result.stdout
    assert "/dev/null:1:1: TL001" in result.stdout and "a device" in result.stdout
    assert result.returncode == 1 and "internal error" not in result.stderr


def test_symlink_loop_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "a.py").symlink_to(tmp_path / "b.py")
    (tmp_path / "b.py").symlink_to(tmp_path / "a.py")
    for args in (["a.py"], ["--fix", "a.py"], [str(tmp_path / "a.py")]):
        result = subprocess.run([sys.executable, "-m", "torchleak", "check", *args],
                                cwd=tmp_path, capture_output=True, text=True, timeout=60)
        assert "TL001 cannot read: symbolic link loop" in result.stdout
        assert result.returncode == 1 and result.stderr == "", result.stderr


def _notebook(cells: list[list[str]]) -> dict[str, object]:
    return {"cells": [{"cell_type": "code", "execution_count": None, "id": f"c{i}",
                       "metadata": {}, "outputs": [], "source": src}
                      for i, src in enumerate(cells)],
            "metadata": {"kernelspec": {"name": "python3"}}, "nbformat": 4,
            "nbformat_minor": 5}


def test_notebook_fix_keeps_the_json_layout(tmp_path: Path) -> None:
    nb = _notebook([["%matplotlib inline\n", "history = []\n"],
                    ["for x in loader:\n", "    loss = model(x).mean()\n",
                     "    loss.backward()\n", "    optimizer.step()\n",
                     "    history.append(loss)  # é\n", "print(sum(history))"]])
    before = (json.dumps(nb, indent=1, sort_keys=True, ensure_ascii=False) + "\n").encode()
    result = _fix(tmp_path, before, name="nb.ipynb")
    after = (tmp_path / "nb.ipynb").read_bytes()
    _expect_only_insert(before, after, b"history.append(loss", b".item()")
    assert result.returncode == 0, result.stdout + result.stderr


def test_notebook_with_an_unknown_layout_is_left_alone(tmp_path: Path) -> None:
    nb = _notebook([["history = []\n", "for x in loader:\n", "    loss = model(x).mean()\n",
                     "    loss.backward()\n", "    optimizer.step()\n",
                     "    history.append(loss)\n", "print(sum(history))"]])
    before = json.dumps(nb, indent=3, separators=(",", " : ")).encode()
    result = _fix(tmp_path, before, name="nb.ipynb")
    assert (tmp_path / "nb.ipynb").read_bytes() == before
    assert "JSON layout" in result.stderr and result.returncode != 0
