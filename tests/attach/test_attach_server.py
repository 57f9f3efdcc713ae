"""The control server, in this process: a Monitor records a loop on a thread of its own
(steps every 10 ms), and the real client talks to it over the real socket."""

from __future__ import annotations

import json
import os
import socket
import stat
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from torchleak.cli import main
from torchleak.commands.attach_client import AttachTarget, Client
from torchleak.errors import EXIT_NOPERM, EXIT_UNAVAILABLE
from torchleak.live.control_protocol import LineReader

from .attachkit import NOBODY, as_other_user, trace_rows


def _client(monitor: Any) -> Client:
    return Client(AttachTarget(monitor.folder))


def _attach_events(monitor: Any) -> list[str]:
    monitor.recorder.writer.flush()
    return [r[0] for r in trace_rows(monitor.trace, "SELECT message FROM events WHERE "
                                                   "kind = 'attach' ORDER BY rowid")]


def test_the_socket_is_0600_in_the_run_folder_and_gone_when_the_run_ends(served: Any) -> None:
    monitor, _loop = served()
    path = monitor.folder / "control.sock"
    mode = os.stat(path).st_mode
    assert stat.S_ISSOCK(mode) and stat.S_IMODE(mode) == 0o600
    assert os.stat(path).st_uid == os.geteuid()
    assert [p.name for p in monitor.folder.iterdir() if p.name.startswith(".control-")] == []
    monitor.stop("finished", 0, analyse=False)
    assert not path.exists()
    meta = trace_rows(monitor.trace, "SELECT value FROM meta WHERE key = 'control'")
    assert json.loads(meta[0][0])["mode"] == "full"


@pytest.mark.skipif(os.geteuid() != 0, reason="acting as another user needs root")
def test_another_user_cannot_connect(served: Any) -> None:
    monitor, _loop = served()
    target = AttachTarget(monitor.folder)
    outcome = as_other_user(NOBODY, lambda: Client(target).hello)
    assert outcome.startswith("AttachRefused: ") and "not yours" in outcome, outcome
    # Made wider by hand, the socket still answers another user (connecting without our
    # client's own checks) with a refusal only.
    os.chmod(monitor.folder / "control.sock", 0o666)

    def raw_hello() -> str:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.connect(str(target.socket_path))
            return (LineReader(sock).readline(10) or b"").decode()

    outcome = json.loads(as_other_user(NOBODY, raw_hello).removeprefix("ok: "))
    assert '"kind":"refused"' in outcome and "this run belongs to another user" in outcome, (
        outcome)
    assert any(f"uid {NOBODY}" in e and "refused" in e for e in _attach_events(monitor))


def test_a_command_runs_on_the_training_thread(served: Any) -> None:
    monitor, loop = served()
    with _client(monitor) as client:
        asked_at = loop.steps
        reply = client.request("eval", 5, code="import threading\n"
                                               "threading.current_thread().name")
    assert reply["ok"] and reply["result"] == "'training'"
    # At the next boundary (counted in steps, not milliseconds: a busy machine is slow).
    assert reply["step"] >= 3 and reply["step"] <= asked_at + 2, (reply, asked_at)


def test_no_boundary_in_time_is_a_timeout_and_the_command_never_runs_later(
        served: Any, tmp_path: Path) -> None:
    monitor, loop = served()
    loop.hold()  # the next step does not end: a loop stuck in C code
    marker = tmp_path / "ran"
    with _client(monitor) as client:
        # The held step cannot end before gate.set() below: a reply now is no hang.
        reply = client.request("eval", 0.3, code=f"open({str(marker)!r}, 'w').close()")
        assert reply["state"] == "timeout"
        assert "no step boundary within 0.3 s" in reply["error"]
        assert "will not run later" in reply["error"]
        loop.gate.set()
        loop.wait_steps(5)
        assert not marker.exists()
        assert client.request("eval", 5, code="1 + 1")["result"] == "2"  # the session goes on
    assert any("cancelled, never ran: no step boundary" in e for e in _attach_events(monitor))


def test_a_command_that_outlives_its_wait_runs_to_its_end_and_is_logged(served: Any) -> None:
    monitor, loop = served()
    with _client(monitor) as client:
        reply = client.request("eval", 0.2, code="import time\ntime.sleep(0.8)\n'slept'")
        assert reply["state"] == "running" and "logged in the trace" in reply["error"]
    loop.wait_steps(2)  # the training thread is back: the eval has ended
    logged = [e for e in _attach_events(monitor) if "time.sleep(0.8)" in e]
    assert logged and "-> ok" in logged[0] and "the client had stopped waiting" in logged[0]
    assert "result: 'slept'" in logged[0]


def test_the_client_may_cancel_a_command_that_waits(served: Any, tmp_path: Path) -> None:
    monitor, loop = served()
    loop.hold()
    marker = tmp_path / "ran"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as raw:
        raw.connect(str(monitor.folder / "control.sock"))
        reader = raw.makefile("rb")
        reader.readline()  # hello
        code = json.dumps(f"open({str(marker)!r}, 'w').close()")
        raw.sendall(b'{"v": 1, "id": 5, "op": "eval", "timeout": 30, "code": %s}\n'
                    % code.encode())
        time.sleep(0.2)
        raw.sendall(b'{"v": 1, "id": 5, "op": "cancel"}\n')  # what Ctrl-C sends
        reply = json.loads(reader.readline())
    assert reply["id"] == 5 and reply["state"] == "cancelled"
    assert "cancelled by the client" in reply["error"]
    loop.gate.set()
    loop.wait_steps(3)
    assert not marker.exists()


def test_a_command_that_waits_when_the_run_ends_is_cancelled(served: Any) -> None:
    monitor, loop = served()
    loop.hold()
    replies: list[dict[str, Any]] = []
    with _client(monitor) as client:
        waiter = threading.Thread(target=lambda: replies.append(
            client.request("eval", 30, code="1")))
        waiter.start()
        time.sleep(0.2)
        monitor.stop("finished", 0, analyse=False)
        waiter.join(timeout=10)
    assert replies and replies[0]["state"] == "ended"
    assert "the run ended first" in replies[0]["error"]


def test_control_off_refuses_eval_and_cleanup_and_still_walks(
        served: Any, capsys: pytest.CaptureFixture[str]) -> None:
    import torch  # noqa: F401 - the walk starts once the program has torch

    monitor, _loop = served(control=False)
    folder = str(monitor.folder)
    assert main(["attach", folder, "--eval", "1"]) == EXIT_NOPERM
    err = capsys.readouterr().err
    assert "eval is off in this run" in err and "--no-control" in err
    assert main(["attach", folder, "--cleanup"]) == EXIT_NOPERM
    assert "cleanup is off in this run" in capsys.readouterr().err
    assert main(["attach", folder, "--walk"]) == 0
    assert "holders at step" in capsys.readouterr().out
    assert main(["attach", folder, "--status"]) == 0
    assert "eval and cleanup are off" in capsys.readouterr().out
    assert any("eval refused" in e for e in _attach_events(monitor))


def test_the_environment_sets_the_default_and_the_option_wins(
        served: Any, capsys: pytest.CaptureFixture[str]) -> None:
    observed, _ = served(env="0")
    assert main(["attach", str(observed.folder), "--eval", "1"]) == EXIT_NOPERM
    observed.stop("finished", 0, analyse=False)
    allowed, _ = served(control=True, env="0")
    assert main(["attach", str(allowed.folder), "--eval", "6 * 7"]) == 0
    assert capsys.readouterr().out == "42\n"
    allowed.stop("finished", 0, analyse=False)
    dark, _ = served(env="off")
    assert not (dark.folder / "control.sock").exists()
    assert main(["attach", str(dark.folder), "--status"]) == EXIT_UNAVAILABLE
    assert "serves no control socket: TORCHLEAK_CONTROL=off" in capsys.readouterr().err


def test_a_socket_left_by_a_dead_process_says_the_run_is_gone(
        served: Any, capsys: pytest.CaptureFixture[str]) -> None:
    monitor, _loop = served()
    monitor.stop("finished", 0, analyse=False)
    left = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    left.bind(str(monitor.folder / "control.sock"))  # what a kill -9 leaves behind
    left.close()
    assert main(["attach", str(monitor.folder), "--eval", "1"]) == EXIT_UNAVAILABLE
    err = capsys.readouterr().err
    assert "is gone" in err and "finished" in err
    assert err.count("\n") == 1  # one line, no traceback


def test_bad_requests_are_answered_and_the_session_goes_on(served: Any) -> None:
    monitor, _loop = served()
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as raw:
        raw.connect(str(monitor.folder / "control.sock"))
        reader = raw.makefile("rb")
        hello = json.loads(reader.readline())
        assert hello["kind"] == "hello" and hello["v"] == 1 and "eval" in hello["ops"]

        def ask(line: bytes) -> dict[str, Any]:
            raw.sendall(line + b"\n")
            return json.loads(reader.readline())

        assert "protocol version 99" in ask(b'{"v": 99, "op": "status"}')["error"]
        assert "not JSON" in ask(b"status please")["error"]
        assert "unknown command 'nope'" in ask(b'{"v": 1, "op": "nope"}')["error"]
        assert "SyntaxError" in ask(b'{"v": 1, "op": "eval", "code": "def f(:"}')["error"]
        assert ask(b'{"v": 1, "id": 3, "op": "status"}')["step"] >= 3
        try:  # over the limit, no newline: an answer, then a hang-up (maybe mid-send)
            raw.sendall(b"x" * (2 << 20))
        except (BrokenPipeError, ConnectionResetError):
            pass
        assert "longer than" in json.loads(reader.readline())["error"]
        try:  # the hang-up: an end of file, or a reset when our unread bytes were dropped
            rest = reader.readline()
        except ConnectionResetError:
            rest = b""
        assert rest == b""


def test_a_cuda_allocator_snapshot_is_written_when_the_program_uses_cuda(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import pickle

    import torch

    from torchleak.live import control_jobs
    from torchleak.record.probes import cuda

    assert control_jobs._cuda_snapshot(tmp_path, 7) is None  # no CUDA here: nothing
    segments = {"segments": [{"device": 0, "total_size": 2 << 20, "blocks": []}]}
    monkeypatch.setattr(cuda, "cuda_in_use", lambda: True)  # this machine has no GPU
    monkeypatch.setattr(torch.cuda.memory, "_snapshot", lambda: segments)
    path = control_jobs._cuda_snapshot(tmp_path, 7)
    assert path == str(tmp_path / "cuda-snapshot-step7.pickle")
    with open(path, "rb") as handle:
        assert pickle.load(handle) == segments


def test_a_run_folder_too_deep_for_a_socket_address_still_serves(open_folder: Path) -> None:
    from torchleak.live.engine import Monitor, MonitorOptions

    from .attachkit import LoopThread

    deep = open_folder / ("d" * 60) / ("e" * 60) / "run"
    assert len(str(deep / "control.sock")) > 108  # longer than sun_path
    monitor = Monitor(MonitorOptions(out=deep, quiet=True, name="deep")).start()
    loop = LoopThread().start()
    try:
        with _client(monitor) as client:
            assert client.request("eval", 5, code="2 ** 10")["result"] == "1024"
        assert stat.S_IMODE(os.stat(deep / "control.sock").st_mode) == 0o600
    finally:
        loop.stop()
        monitor.stop("finished", 0, analyse=False)
    assert not (deep / "control.sock").exists()


def test_a_bad_timeout_is_one_line(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["attach", str(tmp_path), "--eval", "1", "--timeout", "0"]) == 64
    assert capsys.readouterr().err == ("torchleak: error: --timeout must be in (0, 3600] "
                                       "seconds, got 0.0\n")
    assert main(["attach", str(tmp_path / "nothing"), "--walk"]) == 66
    assert "no trace at" in capsys.readouterr().err


def test_each_rank_serves_its_own_socket(served: Any, monkeypatch: pytest.MonkeyPatch,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "1")
    monitor, _loop = served()
    assert monitor.folder.name == "rank1" and (monitor.folder / "control.sock").exists()
    run = str(monitor.folder.parent)
    assert main(["attach", run, "--rank", "1", "--eval", "'rank one'"]) == 0
    assert capsys.readouterr().out == "'rank one'\n"
    assert main(["attach", str(monitor.trace), "--status"]) == 0
    assert ", rank 1) at step" in capsys.readouterr().out
    assert main(["attach", run, "--rank", "0", "--status"]) == 64
    assert "no rank 0 in" in capsys.readouterr().err
