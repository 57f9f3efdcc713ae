"""What `pip install torchleak` gives: the pytest plugin, shell completion, the licence,
the pre-commit hook, and an import that stays light."""

from __future__ import annotations

import os
import subprocess
import sys
from importlib.metadata import entry_points, metadata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_the_pytest_plugin_is_an_installed_entry_point() -> None:
    (plugin,) = [e for e in entry_points(group="pytest11") if e.name == "torchleak"]
    assert plugin.value == "torchleak.pytest_plugin"


def test_licence_file_matches_the_declared_licence() -> None:
    text = (ROOT / "LICENSE").read_text()
    assert "Apache License" in text and "Version 2.0, January 2004" in text
    assert "TERMS AND CONDITIONS FOR USE, REPRODUCTION, AND DISTRIBUTION" in text
    info = metadata("torchleak")
    assert "Apache" in (info.get("License") or info.get("License-Expression") or "")
    assert "License :: OSI Approved :: Apache Software License" in info.get_all("Classifier")


def run(args: list[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "torchleak", *args], text=True,
                          capture_output=True, timeout=60, env=env)


def test_completion_scripts_and_completions() -> None:
    for shell in ("bash", "zsh", "fish"):
        script = run(["completion", shell])
        assert script.returncode == 0 and "torchleak" in script.stdout


def test_completions_name_the_subcommands(tmp_path: Path) -> None:
    out = tmp_path / "completions"
    line = "torchleak rep"
    env = dict(os.environ, _ARGCOMPLETE="1", COMP_LINE=line, COMP_POINT=str(len(line)),
               _ARGCOMPLETE_STDOUT_FILENAME=str(out))
    subprocess.run([sys.executable, "-m", "torchleak"], env=env, timeout=60,
                   capture_output=True)
    assert out.read_text().split() == ["report"]


def test_pre_commit_hook_runs_the_checker() -> None:
    yaml = pytest.importorskip("yaml", reason="needs pyyaml to read the hook file")
    (hook,) = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())
    assert hook["id"] == "torchleak-check" and hook["entry"] == "torchleak check"
    assert "python" in hook["types_or"]


def test_check_explain_prints_a_rules_doc() -> None:
    result = run(["check", "--explain", "TL102"])
    assert result.returncode == 0 and "(TL102)" in result.stdout


def test_light_imports() -> None:
    code = ("import sys, torchleak, torchleak.pytest_plugin; "
            "print(sorted(m for m in ('torch', 'lightning', 'transformers', 'argcomplete') "
            "if m in sys.modules))")
    result = subprocess.run([sys.executable, "-c", code], text=True, capture_output=True,
                            timeout=60)
    assert result.stdout.strip() == "[]", result.stderr
