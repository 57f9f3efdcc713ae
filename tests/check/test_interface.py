"""ruff's interface: output formats, --explain, --statistics, per-file configuration and
per-file-ignores, --exit-zero."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from xml.etree import ElementTree

import pytest

LEAK = """\
all_losses = []
for batch in dataloader:
    loss = model(batch)
    all_losses.append(loss)
"""
SUM = """\
def train(model, loader, opt):
    total = 0
    for x in loader:
        loss = model(x).mean()
        loss.backward()
        opt.step()
        total += loss
    print(total)
"""


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "torchleak", "check", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=120)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "train.py").write_text(LEAK)
    (tmp_path / "sum.py").write_text(SUM)
    return tmp_path


def test_concise_is_one_line_and_format_is_an_alias(project: Path) -> None:
    concise = cli("--output-format", "concise", "train.py", cwd=project).stdout
    assert concise.splitlines()[0].startswith("train.py:4:5: TL102 ")
    assert "|" not in concise
    assert cli("--format", "text", "train.py", cwd=project).stdout == concise


def test_full_frame_and_help_line(project: Path) -> None:
    out = cli("--isolated", "sum.py", cwd=project).stdout
    assert "7 |         total += loss\n  |         ^^^^^^^^^^^^^ TL101" in out
    assert "= help: Add `.item()`" in out and "sum.py:7:9: TL101 [*]" in out


def test_explain(project: Path) -> None:
    result = cli("--explain", "TL101", cwd=project)
    assert result.returncode == 0
    assert result.stdout.startswith("# tensor-accumulated-with-graph (TL101)")
    assert "## Fix safety" in result.stdout
    bad = cli("--explain", "TL999", cwd=project)
    assert bad.returncode == 2 and "unknown rule" in bad.stderr


def test_statistics(project: Path) -> None:
    out = cli("--isolated", "--statistics", ".", cwd=project).stdout.splitlines()
    assert out[0].split() == ["1", "TL101", "[*]", "tensor-accumulated-with-graph"]
    assert out[1].split() == ["1", "TL102", "[", "]", "graph-tensor-stored"]


def test_exit_zero(project: Path) -> None:
    assert cli("--exit-zero", "train.py", cwd=project).returncode == 0


def test_machine_formats(project: Path) -> None:
    data = json.loads(cli("--output-format", "json", "sum.py", cwd=project).stdout)
    assert data[0]["fix"]["applicability"] == "safe" and "url" not in data[0]
    sarif = json.loads(cli("--output-format", "sarif", "sum.py", cwd=project).stdout)
    driver = sarif["runs"][0]["tool"]["driver"]
    assert "informationUri" not in driver
    assert all("helpUri" not in r for r in driver["rules"])
    assert "## Why is this bad?" in driver["rules"][0]["help"]["markdown"]
    gitlab = json.loads(cli("--output-format", "gitlab", ".", cwd=project).stdout)
    assert {g["check_name"] for g in gitlab} == {"TL101", "TL102"}
    assert len({g["fingerprint"] for g in gitlab}) == 2
    assert gitlab[0]["location"]["lines"]["begin"] >= 1
    junit = ElementTree.fromstring(cli("--output-format", "junit", ".", cwd=project).stdout)
    assert junit.get("failures") == "2"
    assert {c.get("name") for c in junit.iter("testcase")} == {"torchleak.TL101",
                                                              "torchleak.TL102"}


def test_nearest_pyproject_per_file(project: Path) -> None:
    (project / "pyproject.toml").write_text('[tool.torchleak]\nignore = ["TL101"]\n')
    sub = project / "pkg"
    sub.mkdir()
    (sub / "pyproject.toml").write_text('[tool.torchleak]\nignore = ["TL102"]\n')
    (sub / "train.py").write_text(LEAK)
    (sub / "sum.py").write_text(SUM)
    out = cli("--output-format", "concise", ".", cwd=project).stdout
    assert "pkg/sum.py:7:9: TL101" in out and "pkg/train.py" not in out
    assert "train.py:4:5: TL102" in out and "\nsum.py" not in out and \
        not out.startswith("sum.py")


def test_per_file_ignores(project: Path) -> None:
    (project / "tests").mkdir()
    (project / "tests" / "t.py").write_text(LEAK)
    (project / "pyproject.toml").write_text(
        '[tool.torchleak.per-file-ignores]\n"tests/*" = ["TL1"]\n"sum.py" = ["ALL"]\n')
    out = cli("--output-format", "concise", ".", cwd=project).stdout
    assert "train.py:4:5: TL102" in out
    assert "tests/t.py" not in out and "sum.py" not in out
    (project / "pyproject.toml").write_text('[tool.torchleak.per-file-ignores]\n"x" = 1\n')
    bad = cli(".", cwd=project)
    assert bad.returncode == 2 and "per-file-ignores" in bad.stderr


def test_quiet_keeps_frames_and_drops_the_summary(project: Path) -> None:
    lines = "".join(f"x{i} = {i}\n" for i in range(12))
    (project / "long.py").write_text(lines + SUM)
    out = cli("--isolated", "-q", "long.py", cwd=project).stdout
    assert "19 |         total += loss" in out and "Found" not in out
