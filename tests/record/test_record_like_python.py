"""``torchleak run script.py`` behaves exactly like ``python script.py``: exit code,
stdout, the traceback on stderr, argv, ``__main__``, ``sys.path[0]``, cwd and stdin; bad
input gets one line and a distinct exit code; the help works."""

from __future__ import annotations

from pathlib import Path

import pytest
from recordkit import (Recorded, RunPool, prefetch, record, run_python, run_torchleak,
                       without_our_lines, write_script)

from torchleak.errors import EXIT_CANTCREAT, EXIT_DATAERR, EXIT_NOINPUT

pytestmark = pytest.mark.slow

RAISES = """
    import sys

    def load(batch):
        return parse(batch)

    def parse(batch):
        if batch > 1:
            raise ValueError(f"bad batch {batch}")
        return batch

    print("starting", flush=True)
    for batch in range(3):
        print("batch", load(batch))
"""

INTROSPECT = """
    import os
    import sys

    print("argv", sys.argv)
    print("name", __name__)
    print("path0", sys.path[0])
    print("cwd", os.getcwd())
    print("stdin", repr(sys.stdin.read()))
    sys.exit(int(sys.argv[-1]))
"""

MODULE = """
    import os
    import sys

    print("argv", sys.argv)
    print("name", __name__)
    print("path0", sys.path[0])
    print("cwd", os.getcwd())
"""


@prefetch
def raise_plain_loud_quiet(folder: Path) -> tuple[object, Recorded, Recorded]:
    script = write_script(folder, "raises.py", RAISES)
    plain = run_python(["raises.py"], cwd=folder)
    loud = record(folder, script)
    quiet = Recorded(run_torchleak(["run", "--quiet", "--out", str(folder / "quiet"),
                                    "raises.py"], cwd=folder), folder / "quiet")
    return plain, loud, quiet


@pytest.fixture(scope="module")
def raising(runs: RunPool) -> tuple[object, Recorded, Recorded]:
    return runs.get(raise_plain_loud_quiet)


def test_uncaught_exception_exit_code_and_stdout(raising: tuple) -> None:
    plain, loud, quiet = raising
    assert plain.returncode == 1
    assert loud.proc.returncode == quiet.proc.returncode == 1
    assert loud.proc.stdout == quiet.proc.stdout == plain.stdout


def test_uncaught_exception_traceback_is_pythons(raising: tuple) -> None:
    plain, loud, quiet = raising
    assert "ValueError: bad batch 2" in plain.stderr
    assert 'in parse\n    raise ValueError(f"bad batch {batch}")' in plain.stderr
    assert quiet.proc.stderr == plain.stderr  # --quiet: byte for byte
    assert without_our_lines(loud.proc.stderr) == plain.stderr
    assert loud.proc.stderr.startswith("torchleak: recording")


def test_a_crash_is_recorded_as_crashed(raising: tuple) -> None:
    _, loud, _ = raising
    assert loud.meta("status") == "crashed"
    assert loud.meta("exit_code") == 1


INTRO_ARGS = ["../scripts/introspect.py", "--lr", "0.1", "x y", "3"]
INTRO_STDIN = "line one\nline two\n"


@prefetch
def introspect_plain_and_ours(folder: Path) -> tuple[object, object, Path, Path]:
    scripts = folder / "scripts"
    write_script(scripts, "introspect.py", INTROSPECT)
    caller = folder / "elsewhere"  # cwd is not the script's folder
    caller.mkdir()
    plain = run_python(INTRO_ARGS, cwd=caller, stdin=INTRO_STDIN)
    ours = run_torchleak(["run", "--quiet", "--out", str(folder / "intro"), *INTRO_ARGS],
                         cwd=caller, stdin=INTRO_STDIN)
    return plain, ours, scripts, caller


@pytest.fixture(scope="module")
def introspected(runs: RunPool) -> tuple[object, object, Path, Path]:
    plain, ours, scripts, caller = runs.get(introspect_plain_and_ours)
    assert plain.returncode == 3 and plain.stderr == ""
    return plain, ours, scripts, caller


def _lines(stdout: str) -> dict[str, str]:
    return dict(line.split(" ", 1) for line in stdout.splitlines())


def test_name_path_cwd_stdin_and_exit_code(introspected: tuple) -> None:
    plain, ours, scripts, caller = introspected
    assert (ours.returncode, ours.stderr) == (3, "")  # sys.exit(3) -> 3
    lines, expected = _lines(ours.stdout), _lines(plain.stdout)
    for key in ("name", "path0", "cwd", "stdin"):
        assert lines[key] == expected[key], key
    assert lines["name"] == "__main__"
    assert lines["path0"] == str(scripts.resolve())
    assert lines["cwd"] == str(caller.resolve())
    assert lines["stdin"] == repr(INTRO_STDIN)
    assert eval(lines["argv"])[1:] == INTRO_ARGS[1:]


def test_argv0_is_the_script_as_typed(introspected: tuple) -> None:
    plain, ours, _, _ = introspected
    assert _lines(ours.stdout)["argv"] == _lines(plain.stdout)["argv"] == repr(INTRO_ARGS)
    assert ours.stdout == plain.stdout


def _module_package(folder: Path) -> Path:
    pkg = folder / "modrun"
    write_script(pkg, "trainpkg/__init__.py", "")
    write_script(pkg, "trainpkg/train.py", MODULE)
    return pkg


@prefetch
def module_from_cwd(folder: Path) -> tuple[object, object, Path]:
    pkg = _module_package(folder)  # the cwd: on sys.path for -m, as for python -m
    plain = run_python(["-m", "trainpkg.train"], cwd=pkg)
    ours = run_torchleak(["run", "--quiet", "--out", str(folder / "out"),
                          "-m", "trainpkg.train"], cwd=pkg)
    return plain, ours, folder / "out" / "trace.sqlite"


@prefetch
def module_from_pythonpath(folder: Path) -> tuple[object, object]:
    pkg = _module_package(folder)
    elsewhere = folder / "elsewhere"
    elsewhere.mkdir()
    env = {"PYTHONPATH": str(pkg)}
    plain = run_python(["-m", "trainpkg.train"], cwd=elsewhere, env=env)
    ours = run_torchleak(["run", "--quiet", "--out", str(folder / "out"),
                          "-m", "trainpkg.train"], cwd=elsewhere, env=env)
    return plain, ours


def test_dash_m_module_runs_like_python_dash_m(runs: RunPool) -> None:
    plain, ours, trace = runs.get(module_from_cwd)
    assert plain.returncode == 0, plain.stderr
    assert (ours.returncode, ours.stdout, ours.stderr) == (0, plain.stdout, plain.stderr)
    assert "name __main__" in ours.stdout
    assert trace.exists()


def test_dash_m_module_in_a_package_on_pythonpath(runs: RunPool) -> None:
    plain, ours = runs.get(module_from_pythonpath)
    assert plain.returncode == 0, plain.stderr
    assert (ours.returncode, ours.stdout, ours.stderr) == (0, plain.stdout, plain.stderr)


def test_dash_m_passes_options_to_the_module(workdir: Path) -> None:
    # Fails in argument parsing, before torch is imported: cheap, so not prefetched.
    pkg = _module_package(workdir)
    plain = run_python(["-m", "trainpkg.train", "--epochs", "2"], cwd=pkg)
    ours = run_torchleak(["run", "--quiet", "--out", str(workdir / "modout3"),
                          "-m", "trainpkg.train", "--epochs", "2"], cwd=pkg)
    assert (ours.returncode, ours.stdout, ours.stderr) == (0, plain.stdout, plain.stderr)


def _one_line_error(proc: object) -> str:
    stderr = proc.stderr  # type: ignore[attr-defined]
    assert "Traceback" not in stderr
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith("torchleak: error: ")
    return lines[0]


def test_no_such_script(workdir: Path) -> None:
    proc = run_torchleak(["run", "missing.py"], cwd=workdir)
    assert proc.returncode == EXIT_NOINPUT == 66
    assert "missing.py" in _one_line_error(proc)


def test_directory_without_main(workdir: Path) -> None:
    (workdir / "project").mkdir()
    proc = run_torchleak(["run", "project"], cwd=workdir)
    assert proc.returncode == EXIT_NOINPUT == 66
    assert "directory" in _one_line_error(proc)


def test_syntax_error(workdir: Path) -> None:
    write_script(workdir, "broken.py", "def train(:\n    pass\n")
    proc = run_torchleak(["run", "broken.py"], cwd=workdir)
    assert proc.returncode == EXIT_DATAERR == 65
    assert "broken.py:1" in _one_line_error(proc)


def test_unwritable_out(workdir: Path) -> None:
    write_script(workdir, "fine.py", "print('never runs')\n")
    (workdir / "a-file").write_text("")
    proc = run_torchleak(["run", "--out", str(workdir / "a-file" / "run"), "fine.py"],
                         cwd=workdir)
    assert proc.returncode == EXIT_CANTCREAT == 73
    assert "--out" in _one_line_error(proc)
    assert "never runs" not in proc.stdout


@pytest.mark.parametrize("args", [["--help"], ["run", "--help"]])
def test_help_exits_zero(workdir: Path, args: list[str]) -> None:
    proc = run_torchleak(args, cwd=workdir)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("usage: ")
