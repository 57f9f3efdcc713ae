"""What ``--eval`` code sees and gives back, and the ``sys.remote_exec`` path's script."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import types
from pathlib import Path
from typing import Any

import pytest

from torchleak.cli import main
from torchleak.errors import EXIT_UNAVAILABLE
from torchleak.live.control_eval import MAX_OUTPUT, evaluate


@pytest.fixture
def script(monkeypatch: pytest.MonkeyPatch) -> types.ModuleType:
    """A ``__main__`` for the code to run in, as the training script's would be."""
    module = types.ModuleType("__main__")
    module.history = [1, 2, 3]  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "__main__", module)
    return module


def _training_frame() -> Any:
    def train() -> Any:
        step, batch = 41, "b"  # noqa: F841 - read by the attached code
        return sys._getframe()

    return train()


def test_the_code_reads_the_training_locals_and_writes_the_script_globals(
        script: types.ModuleType) -> None:
    frame = _training_frame()
    reply = evaluate("lr = step + 1\nprint(len(history))\n(lr, batch)", frame)
    assert reply["ok"], reply
    assert reply["stdout"] == "3\n" and reply["result"] == "(42, 'b')"
    assert script.lr == 42  # type: ignore[attr-defined]
    assert "step" not in frame.f_locals or frame.f_locals["step"] == 41
    assert reply["frame"].startswith("train (")


def test_an_exception_comes_back_as_its_traceback(script: types.ModuleType) -> None:
    for code, last in (("1 / 0", "ZeroDivisionError: division by zero"),
                       ("raise SystemExit(3)", "SystemExit: 3"),
                       ("raise KeyboardInterrupt('x')", "KeyboardInterrupt: x"),
                       ("raise GeneratorExit", "GeneratorExit"),
                       ("undefined_name", "NameError: name 'undefined_name' is not defined")):
        reply = evaluate(code, None)
        assert not reply["ok"]
        assert reply["error"].startswith("Traceback (most recent call last):\n  File "
                                         '"<attach>", line 1')
        assert reply["error"].strip().endswith(last)
        assert "torchleak" not in reply["error"]


def test_only_the_training_threads_output_is_captured(script: types.ModuleType,
                                                      capsys: pytest.CaptureFixture[str]
                                                      ) -> None:
    started, release = threading.Event(), threading.Event()

    def other() -> None:
        started.set()
        release.wait(5)
        print("from another thread")

    thread = threading.Thread(target=other)
    thread.start()
    started.wait(5)
    script.release = release  # type: ignore[attr-defined]
    script.other = thread  # type: ignore[attr-defined]
    reply = evaluate("release.set()\nother.join(5)\nprint('from the code')", None)
    assert reply["stdout"] == "from the code\n"
    assert "from another thread" in capsys.readouterr().out
    print("from the program after the code")  # the stream in front sends it on, as before
    assert capsys.readouterr().out == "from the program after the code\n"


def test_big_output_is_cut_and_says_so(script: types.ModuleType) -> None:
    reply = evaluate("print('x' * 200_000)\n'y' * 200_000", None)
    assert len(reply["stdout"]) < MAX_OUTPUT + 100 and "more characters]" in reply["stdout"]
    assert len(reply["result"]) <= MAX_OUTPUT + 100 and "..." in reply["result"]


@pytest.mark.skipif(sys.version_info >= (3, 14), reason="sys.remote_exec exists here")
def test_a_process_torchleak_does_not_record_needs_python_314(
        capsys: pytest.CaptureFixture[str]) -> None:
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        assert main(["attach", str(sleeper.pid), "--eval", "1"]) == EXIT_UNAVAILABLE
        err = capsys.readouterr().err
        assert "not recorded by torchleak" in err and "Python 3.14" in err
        assert main(["attach", str(sleeper.pid), "--walk"]) == EXIT_UNAVAILABLE
        assert "start it with `torchleak run`" in capsys.readouterr().err
    finally:
        sleeper.kill()
        sleeper.wait()


def test_the_remote_script_answers_like_the_socket(tmp_path: Path) -> None:
    """What ``sys.remote_exec`` would run in the target, run here by a plain Python."""
    from torchleak.commands.attach_remote import remote_script

    answer = tmp_path / "answer.json"
    path = tmp_path / "eval.py"
    path.write_text(remote_script("print(len(history)); len(history) * 2", answer))
    check = ("history = [1, 2, 3]\nexec(open(%r).read())\n"
             "assert '_torchleak_attach_eval' not in globals()\n" % str(path))
    subprocess.run([sys.executable, "-c", check], check=True, timeout=60)
    reply = json.loads(answer.read_text())
    assert reply == {"ok": True, "state": "done", "stdout": "3\n", "stderr": "",
                     "error": None, "result": "6"}
    assert oct(os.stat(answer).st_mode & 0o777) == "0o600"


def test_the_remote_script_keeps_the_programs_threads_and_exceptions(tmp_path: Path) -> None:
    """The remote script's code raises KeyboardInterrupt after starting a thread that
    prints: the answer has the traceback, the program's thread prints to the program's
    own stdout, and the program goes on to its end."""
    from torchleak.commands.attach_remote import remote_script

    answer = tmp_path / "answer.json"
    path = tmp_path / "eval.py"
    code = ("import threading\n"
            "def chatter():\n"
            "    for i in range(300):\n"
            "        print('chatter', i)\n"
            "worker = threading.Thread(target=chatter)\n"
            "worker.start()\n"
            "print('from the code')\n"
            "raise KeyboardInterrupt")
    path.write_text(remote_script(code, answer))
    program = ("def train():\n"
               "    exec(open(%r).read(), {'__name__': 'eval'})\n"
               "    import __main__\n"
               "    __main__.worker.join()\n"
               "train()\n"
               "print('program ends')\n" % str(path))
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.endswith("chatter 299\nprogram ends\n")
    assert "from the code" not in done.stdout
    reply = json.loads(answer.read_text())
    assert reply["stdout"] == "from the code\n"
    assert reply["error"].strip().endswith("KeyboardInterrupt")
