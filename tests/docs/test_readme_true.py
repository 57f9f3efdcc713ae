"""The README and the docs say what the program does, to the letter: every exit code it
can return is in the README's table, a bad command line exits with the documented code
and one line, every option is documented where its command is, every documented option
exists, and the set-up brings what torch needs to import quietly."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from torchleak import errors
from torchleak.cli import COMMANDS, _build_parser, main
from torchleak.system.doctor_model import EXIT_PROBLEMS

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")
# Where each command's options are documented (besides the README).
HOMES = {"run": ["live.md", "safe.md", "torchrun.md"], "report": ["views.md"],
         "top": ["views.md"], "ls": ["views.md"], "query": ["views.md"], "diff": ["views.md"],
         "attach": ["attach.md"], "doctor": ["doctor.md"], "check": ["check-rules.md"],
         "completion": []}
CHECK_ERROR = 2  # `torchleak check` keeps ruff's code for a configuration it cannot use
INTERRUPTED = 130


def _table_codes() -> set[int]:
    section = README[README.index("## Exit codes"):]
    section = section[:section.index("\n## ")]
    codes: set[int] = set()
    for line in section.splitlines():
        cells = line.split("|")
        if len(cells) > 2 and re.fullmatch(r"[\d /]+", cells[1].strip()):
            codes.update(int(c) for c in cells[1].split("/"))
    return codes


def test_every_exit_code_the_program_returns_is_in_the_readme_table() -> None:
    defined = {value for name, value in vars(errors).items() if name.startswith("EXIT_")}
    expected = defined | {EXIT_PROBLEMS, CHECK_ERROR, INTERRUPTED}
    assert _table_codes() == expected


@pytest.mark.parametrize("argv, names", [
    (["run", "--bogus", "train.py"], "`torchleak run --help`"),
    (["report", "--format", "pdf"], "`torchleak report --help`"),
    (["diff", "only-one"], "`torchleak diff --help`"),
    (["nonsense"], "`torchleak --help`"),
    (["--bogus"], "`torchleak --help`"),
])
def test_a_bad_command_line_exits_64_with_one_line_saying_what_to_type(
        argv: list[str], names: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == errors.EXIT_USAGE == 64
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("torchleak"), err
    assert ": error: " in err and names in err, err
    assert "64" in {str(code) for code in _table_codes()}


def test_no_command_at_all_is_a_bad_command_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == errors.EXIT_USAGE
    assert "COMMAND" in capsys.readouterr().err  # the usage: which commands there are


def _options(name: str) -> list[tuple[list[str], list[str]]]:
    parser = _build_parser([name])
    sub = next(a for a in parser._actions if a.dest == "command").choices[name]
    return [([o for o in a.option_strings if o.startswith("--") and o != "--help"],
             [str(c) for c in a.choices or ()]) for a in sub._actions if a.option_strings]


def _said(text: str, word: str) -> bool:
    return re.search(r"(?<![\w-])" + re.escape(word) + r"(?![\w-])", text) is not None


@pytest.mark.parametrize("command", list(COMMANDS))
def test_every_option_is_documented_where_its_command_is(command: str) -> None:
    docs = [(ROOT / "docs" / name).read_text(encoding="utf-8") for name in HOMES[command]]
    text = "\n".join([README, *docs])
    missing = []
    for long_names, choices in _options(command):
        if long_names and not any(_said(text, o) for o in long_names):
            missing.append(long_names[0])
        for choice in choices:  # each value of a documented option, in its own doc
            if not _said("\n".join(docs) or README, choice):
                missing.append(f"{long_names[0]} {choice}")
    assert not missing, missing


def test_every_documented_option_exists() -> None:
    known = {name: {o for longs, _ in _options(name) for o in longs} for name in COMMANDS}
    for name in COMMANDS:  # short spellings too (-o, -q, -m)
        parser = _build_parser([name])
        sub = next(a for a in parser._actions if a.dest == "command").choices[name]
        known[name] |= {o for a in sub._actions for o in a.option_strings}
    pattern = re.compile(r"torchleak (%s)\b([^`\n|]*)" % "|".join(COMMANDS))
    unknown, seen = [], 0
    for file in [ROOT / "README.md", *(ROOT / "docs").glob("*.md")]:
        for match in pattern.finditer(file.read_text(encoding="utf-8")):
            for option in re.findall(r"(?<![\w-])(--?[a-zA-Z][\w-]*)", match.group(2)):
                seen += 1
                if option not in known[match.group(1)]:
                    unknown.append(f"{file.name}: {match.group(0)}")
    assert seen > 20  # the docs do show options on command lines
    assert not unknown, unknown


def test_the_set_up_extra_brings_what_torch_needs_to_import_quietly() -> None:
    """torch prints "Failed to initialize NumPy" on import without numpy: the README's
    first command installs ``.[all]``, so ``all`` must bring it."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    extras = project["project"]["optional-dependencies"]

    def closure(extra: str) -> set[str]:
        names: set[str] = set()
        for req in extras[extra]:
            inner = re.fullmatch(r"torchleak\[([\w,]+)\]", req.replace(" ", ""))
            if inner:
                for sub in inner.group(1).split(","):
                    names |= closure(sub)
            else:
                names.add(re.split(r"[<>=!~;\[ ]", req, maxsplit=1)[0].lower())
        return names

    assert "numpy" in closure("all")
    assert '-e ".[all]"' in README


def test_torch_imports_quietly_in_the_set_up_environment() -> None:
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-c", "import torch, torchleak"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr


def test_the_test_command_shows_what_the_suite_costs() -> None:
    """The README's test command (the one CI runs, ``test_docs_ship``) prints the 15
    slowest tests, so the suite's cost stays visible."""
    command = [line for line in README.splitlines()
               if line.startswith("python3 -m venv") and "pytest" in line]
    assert len(command) == 1 and command[0].endswith("-m pytest -q --durations=15")
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert command[0] in ci.splitlines()
