"""The command line: formats, selection, noqa, config, exit codes, notebooks."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from torchleak.check import check_source

LEAK = """\
all_losses = []
for batch in dataloader:
    loss = model(batch)
    all_losses.append(loss)
"""


def cli(*args: str, cwd: Path, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "torchleak", "check", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=120, input=stdin)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "train.py").write_text(LEAK)
    (tmp_path / "clean.py").write_text("x = 1\n")
    return tmp_path


def test_text_output_and_exit_code(project: Path) -> None:
    result = cli("train.py", cwd=project)
    assert result.returncode == 1
    assert result.stdout.startswith("train.py:4:5: TL102 ")
    assert "4 |     all_losses.append(loss)\n  |     ^^^^^^^^^^^^^^^^^^^^^^^ TL102" \
        in result.stdout  # a code frame with carets by default
    assert cli("clean.py", cwd=project).returncode == 0


def test_json_sarif_github(project: Path) -> None:
    data = json.loads(cli("--format", "json", "train.py", cwd=project).stdout)
    assert data[0]["code"] == "TL102" and data[0]["location"] == {"row": 4, "column": 5}
    assert data[0]["fix"]["edits"][0]["content"] == ".item()"
    sarif = json.loads(cli("--format", "sarif", "train.py", cwd=project).stdout)
    assert sarif["version"] == "2.1.0"
    assert sarif["runs"][0]["results"][0]["ruleId"] == "TL102"
    gh = cli("--format", "github", "train.py", cwd=project).stdout
    assert gh.startswith("::error title=torchleak (TL102),file=train.py,line=4,col=5")


def test_select_ignore(project: Path) -> None:
    assert cli("--ignore", "TL102", "train.py", cwd=project).returncode == 0
    assert cli("--select", "TL3", "train.py", cwd=project).returncode == 0
    assert cli("--select", "TL1", "--ignore", "TL1", "train.py", cwd=project).returncode == 0
    assert cli("--select", "TL102", "--ignore", "TL1", "train.py", cwd=project).returncode == 1
    assert cli("--select", "nonsense", "train.py", cwd=project).returncode == 2


def test_noqa() -> None:
    assert check_source(LEAK.replace("(loss)\n", "(loss)  # noqa: TL102\n")) == []
    assert check_source(LEAK.replace("(loss)\n", "(loss)  # noqa\n")) == []
    assert check_source(LEAK.replace("(loss)\n", "(loss)  # noqa: TL1\n")) == []
    assert check_source(LEAK.replace("(loss)\n", "(loss)  # noqa: TL301\n"))


def test_pyproject_config(project: Path) -> None:
    (project / "pyproject.toml").write_text('[tool.torchleak]\nignore = ["TL102"]\n')
    assert cli("train.py", cwd=project).returncode == 0
    assert cli("--isolated", "train.py", cwd=project).returncode == 1
    (project / "pyproject.toml").write_text('[tool.torchleak]\nexclude = ["train.py"]\n')
    assert cli(".", cwd=project).returncode == 0
    (project / "pyproject.toml").write_text('[tool.torchleak]\nbogus = 1\n')
    result = cli(".", cwd=project)
    assert result.returncode == 2 and "bogus" in result.stderr


def test_config_found_walking_up(project: Path) -> None:
    (project / "pyproject.toml").write_text('[tool.torchleak]\nselect = ["TL3"]\n')
    sub = project / "pkg" / "deep"
    sub.mkdir(parents=True)
    (sub / "t.py").write_text(LEAK)
    assert cli(str(sub), cwd=project).returncode == 0
    assert cli("--extend-select", "TL1", str(sub), cwd=project).returncode == 1


def test_stdin(project: Path) -> None:
    result = cli("-", "--stdin-filename", "x.py", cwd=project, stdin=LEAK)
    assert result.returncode == 1 and result.stdout.startswith("x.py:4:5: TL102")


def test_notebook_cells(project: Path) -> None:
    cells = [
        {"cell_type": "markdown", "source": ["# title"]},
        {"cell_type": "code", "source": ["%matplotlib inline\n", "all_losses = []\n"]},
        {"cell_type": "code", "source": LEAK.splitlines(keepends=True)[1:]},
        {"cell_type": "code", "source": ["def broken(:\n"]},
    ]
    (project / "nb.ipynb").write_text(json.dumps({"cells": cells, "nbformat": 4}))
    out = cli("nb.ipynb", cwd=project).stdout
    assert "nb.ipynb:cell 3:3:5: TL102" in out
    assert "nb.ipynb:cell 4:1:" in out and "TL002" in out


def test_list_rules(project: Path) -> None:
    out = cli("--list-rules", cwd=project).stdout
    assert "TL101" in out and "TL402  off" in out


def test_missing_path_is_a_diagnostic(project: Path) -> None:
    result = cli("nope.py", "train.py", cwd=project)
    assert result.returncode == 1
    assert "nope.py:1:1: TL001" in result.stdout and "TL102" in result.stdout


def test_check_never_imports_torch(project: Path) -> None:
    code = ("import sys; from torchleak.cli import main; "
            "rc = main(['check', '--isolated', 'train.py']); "
            "assert 'torch' not in sys.modules, 'torch imported'; print(rc)")
    result = subprocess.run([sys.executable, "-c", code], cwd=project, capture_output=True,
                            text=True, timeout=120)
    assert result.stdout.strip().endswith("1"), result.stderr
