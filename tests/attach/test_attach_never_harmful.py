"""Attach cannot harm the run it reaches into, nor leak code to someone else's socket.

Each test is a real ``torchleak run`` of a training loop inside a function, reached with
the real ``torchleak attach`` CLI; the run must go on to its own end, exit 0, and print
what it prints without torchleak.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from torchleak.errors import EXIT_NOPERM

from .attachkit import LEAKY, NOBODY, TORCHLEAK, LiveRun, attach, child_env, trace_rows

# Started by an eval: a thread that prints on both streams long after the eval returned.
# One write per line: print() writes its words, spaces and newline apart, so five threads
# printing at once interleave mid-line under python too ("chatter 199chatter 21").
CHATTER = textwrap.dedent("""
    import sys, threading, time
    def chatter(n=200):
        for i in range(n):
            sys.stdout.write(f"chatter {i}\\n")
            sys.stderr.write(f"chatter-err {i}\\n")
            time.sleep(0.001)
    threading.Thread(target=chatter, daemon=False).start()
    print("started")
""")


@pytest.fixture
def run(open_folder: Path) -> Iterator[LiveRun]:
    live = LiveRun.start(open_folder, LEAKY)
    live.wait_for_step(5)
    yield live
    live.kill()


def _ends_normally(live: LiveRun) -> str:
    steps = live.steps()
    live.wait_for_step(steps + 5)  # still training after the attack
    code, out, err = live.finish(timeout=120)
    assert code == 0, err
    # The training reached its end. Threads an eval started may print after it, or in the
    # middle of its line: Python's print from two threads interleaves without torchleak too.
    assert "finished " in out, out
    assert "Traceback" not in err, err
    return out


def test_threads_started_by_an_eval_print_to_the_programs_streams(run: LiveRun) -> None:
    for _ in range(5):
        done = attach(str(run.out), "--eval", CHATTER, cwd=run.folder)
        assert done.returncode == 0 and done.stdout == "started\n", done.stderr
    out = _ends_normally(run)
    assert out.count("chatter 199\n") == 5  # every thread's last line reached the program's


@pytest.mark.parametrize("code, last", [("raise KeyboardInterrupt", "KeyboardInterrupt"),
                                        ("raise GeneratorExit", "GeneratorExit"),
                                        ("import sys; sys.exit(3)", "SystemExit: 3")])
def test_whatever_an_eval_raises_comes_back_and_training_goes_on(run: LiveRun, code: str,
                                                                 last: str) -> None:
    done = attach(str(run.out), "--eval", code, cwd=run.folder)
    assert done.returncode == 1, done.stderr
    assert done.stderr.strip().splitlines()[-1] == last, done.stderr
    _ends_normally(run)


def test_an_evals_output_is_shown_escaped_and_recorded_as_valid_text(run: LiveRun) -> None:
    done = attach(str(run.out), "--eval", "print('\\x1b[2J\\x1b]0;x\\x07' + chr(0xdcff))",
                  cwd=run.folder)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "\\x1b[2J\\x1b]0;x\\x07\\udcff\n"
    steps = run.steps()
    run.wait_for_step(steps + 5)  # the trace still takes rows: the batch was not lost
    events = [m for (m,) in trace_rows(run.out / "trace.sqlite", "SELECT message FROM events "
                                       "WHERE kind = 'attach'")]
    assert any("\\udcff" in m for m in events), events
    _ends_normally(run)


# Another user's listener: records how many connections and bytes it was sent.
IMPOSTOR = textwrap.dedent("""
    import json, os, socket, sys
    path, log = sys.argv[1], sys.argv[2]
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(path)
    os.chmod(path, 0o777)
    sock.listen(8)
    sock.settimeout(0.2)
    seen = {"connections": 0, "bytes": 0}
    while not os.path.exists(path + ".stop"):
        try:
            conn, _ = sock.accept()
        except socket.timeout:
            continue
        seen["connections"] += 1
        conn.settimeout(2)
        try:
            while chunk := conn.recv(65536):
                seen["bytes"] += len(chunk)
        except OSError:
            pass
        conn.close()
    with open(log, "w") as handle:
        json.dump(seen, handle)
""")


@pytest.fixture
def impostor_at(open_folder: Path) -> Iterator[Any]:
    if os.geteuid() != 0:
        pytest.skip("another user's listener needs root to become that user")
    started: list[tuple[subprocess.Popen[bytes], Path]] = []

    def listen(path: Path) -> Path:
        log = open_folder / f"impostor-{len(started)}.json"
        script = open_folder / "impostor.py"
        script.write_text(IMPOSTOR)
        drop = open_folder / "impostor-logs"
        drop.mkdir(mode=0o777, exist_ok=True)
        drop.chmod(0o777)
        log = drop / log.name
        try:  # a Python the other user may run (ours may sit in a private folder)
            proc = subprocess.Popen([_system_python(), str(script), str(path), str(log)],
                                    user=NOBODY, group=NOBODY, extra_groups=[])
        except PermissionError:
            pytest.skip("no Python here that another user may run")
        deadline = time.monotonic() + 30
        while not path.exists():
            assert proc.poll() is None and time.monotonic() < deadline, "no impostor socket"
            time.sleep(0.02)
        started.append((proc, path))
        return log

    yield listen
    for proc, path in started:
        Path(f"{path}.stop").touch()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _system_python() -> str:
    for candidate in ("/usr/bin/python3", "/usr/local/bin/python3"):
        if os.path.exists(candidate):
            return candidate
    return sys.executable


def _received(log: Path, path: Path) -> dict[str, int]:
    Path(f"{path}.stop").touch()
    deadline = time.monotonic() + 30
    while not log.exists():
        assert time.monotonic() < deadline, "the impostor never wrote its log"
        time.sleep(0.05)
    return json.loads(log.read_text())


def test_an_impostor_socket_in_a_shared_folder_receives_nothing(open_folder: Path,
                                                                impostor_at: Any) -> None:
    shared = open_folder / "shared"
    shared.mkdir()
    shared.chmod(0o777)  # anyone may create files here
    sock = shared / "control.sock"
    log = impostor_at(sock)
    (open_folder / "leaky.py").write_text(textwrap.dedent(LEAKY).lstrip())
    proc = subprocess.Popen([*TORCHLEAK, "run", "--out", str(shared), "leaky.py"],
                            cwd=open_folder, text=True, env=child_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    live = LiveRun(open_folder, proc)
    live.out = shared
    try:
        live.wait_for_step(3)
        done = attach(str(shared), "--eval", "print('secret')", cwd=open_folder)
        assert done.returncode == EXIT_NOPERM, done.stderr
        line = done.stderr.strip()
        assert len(line.splitlines()) == 1 and "writable by everyone" in line, line
        code, out, err = live.finish(timeout=120)
    finally:
        live.kill()
    assert code == 0 and out.splitlines()[-1].startswith("finished "), err
    # The run said, once, at its start, that it serves no socket; and went on.
    said = [ln for ln in err.splitlines() if "attach is off for this run" in ln]
    assert len(said) == 1 and str(sock) in said[0], err
    assert _received(log, sock) == {"connections": 0, "bytes": 0}


def test_a_socket_served_by_another_user_receives_nothing(open_folder: Path,
                                                          impostor_at: Any) -> None:
    """Folder and socket file look like the run's own (root chowned them): the kernel's
    word on who listens is what keeps the code from being sent."""
    folder = open_folder / "looks-mine"
    folder.mkdir(mode=0o777)
    folder.chmod(0o777)
    sock = folder / "control.sock"
    log = impostor_at(sock)
    os.chown(sock, os.geteuid(), os.getegid())
    folder.chmod(0o755)
    (folder / "trace.sqlite").touch()  # a trace file names its run folder
    done = attach(str(folder / "trace.sqlite"), "--eval", "print('secret')", cwd=open_folder)
    assert done.returncode == EXIT_NOPERM, done.stderr
    assert f"uid {NOBODY}" in done.stderr or "user nobody" in done.stderr, done.stderr
    assert _received(log, sock)["bytes"] == 0
