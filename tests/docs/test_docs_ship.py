"""Documentation the product points to ships with it, and the README's newcomer commands
are the ones CI runs."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC_PATH = re.compile(r"\bdocs/[\w.-]+\.md(?:#[\w-]+)?")


def _named_docs() -> dict[str, set[str]]:
    """Every ``docs/NAME.md[#anchor]`` named by the README, the docs and the source."""
    named: dict[str, set[str]] = {}
    files = [ROOT / "README.md", *(ROOT / "docs").glob("*.md"),
             *(ROOT / "src" / "torchleak").rglob("*.py")]
    for file in files:
        for match in DOC_PATH.findall(file.read_text(encoding="utf-8")):
            named.setdefault(match, set()).add(str(file.relative_to(ROOT)))
    return named


def _anchors(markdown: str) -> set[str]:
    """GitHub's anchors for the headings of a markdown file."""
    anchors = set()
    for line in markdown.splitlines():
        if line.startswith("#"):
            title = line.lstrip("#").strip().lower()
            anchors.add(re.sub(r"[^\w\- ]", "", title).replace(" ", "-"))
        anchors.update(re.findall(r'<a (?:id|name)="([\w-]+)"', line))
    return anchors


def test_every_doc_the_product_names_exists_with_its_anchor() -> None:
    named = _named_docs()
    assert len(named) > 10  # the README, the docs and the findings all point somewhere
    missing = []
    for ref, where in sorted(named.items()):
        path, _, anchor = ref.partition("#")
        file = ROOT / path
        if not file.is_file():
            missing.append(f"{ref} (named in {sorted(where)[0]})")
        elif anchor and anchor not in _anchors(file.read_text(encoding="utf-8")):
            missing.append(f"{ref}: no such anchor (named in {sorted(where)[0]})")
    assert not missing, missing


def test_ci_runs_the_readme_test_command() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    commands = [line for line in readme.splitlines() if line.startswith("python3 -m venv")]
    assert len(commands) == 2, commands  # set up + example; set up + tests
    assert commands[1] in ci.splitlines()
    assert "examples/leaky_training.py" in commands[0]
    assert (ROOT / "examples" / "leaky_training.py").is_file()
