"""``attach PID --eval`` for a Python process torchleak does not record (Python >= 3.14).

``sys.remote_exec`` asks the target interpreter to run a script file at its next safe
point, on its main thread. The script, written 0600 in a private 0700 folder of ours,
runs the code in the target's ``__main__`` namespace, captures what its thread prints (as
the control socket does: a stream in front of each, installed once, never swapped back)
and whatever it raises, and writes its answer next to itself; we wait for that file. The same owner check as for recorded
runs applies (the process must be ours, see ``attach_client.target_of_pid``), and the
kernel's own ptrace rules apply on top.

A command that has not run within the timeout is withdrawn by deleting its script
(the interpreter then has nothing to run); there is no other way to cancel it.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from torchleak.errors import AttachRefused, AttachUnavailable

POLL_SECONDS = 0.05

# Runs inside the target, which may not have torchleak installed: standard library only,
# and every name it makes is removed again from the namespace it runs in.
SCRIPT = '''
def _torchleak_attach_eval(code, answer):
    import ast, io, json, os, sys, threading, traceback, types
    # One router in front of each stream, installed once and never removed: swapping the
    # streams and back while another thread prints can crash CPython. It sends only this
    # thread's writes, while the code runs, to the answer.
    state = sys.modules.get("_torchleak_attach_streams")
    if state is None:
        state = types.ModuleType("_torchleak_attach_streams")
        state.routes, state.kept = {}, []

        class Routed:
            def __init__(self, name, original):
                self._name, self._original = name, original

            def write(self, text):
                capture = state.routes.get((threading.get_ident(), self._name))
                if capture is not None:
                    return capture.write(text)
                return self._original.write(text)

            def flush(self):
                if (threading.get_ident(), self._name) not in state.routes:
                    self._original.flush()

            def __getattr__(self, name):
                return getattr(self._original, name)

        state.Routed = Routed
        sys.modules[state.__name__] = state
    for name in ("stdout", "stderr"):
        current = getattr(sys, name)
        if current is not None and not isinstance(current, state.Routed):
            state.kept.append(state.Routed(name, current))
            setattr(sys, name, state.kept[-1])
    me, out, err = threading.get_ident(), io.StringIO(), io.StringIO()
    state.routes[(me, "stdout")], state.routes[(me, "stderr")] = out, err
    namespace = sys.modules["__main__"].__dict__
    value, error = None, None
    try:
        tree = ast.parse(code, "<attach>", "exec")
        last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
        exec(compile(tree, "<attach>", "exec"), namespace)
        if last is not None:
            value = eval(compile(ast.Expression(last.value), "<attach>", "eval"), namespace)
    except BaseException as exc:  # the code's, never the program's
        error = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    finally:
        state.routes.pop((me, "stdout"), None)
        state.routes.pop((me, "stderr"), None)
    reply = {"ok": error is None, "state": "done", "stdout": out.getvalue()[:65536],
             "stderr": err.getvalue()[:65536], "error": error,
             "result": None if value is None else repr(value)[:65536]}
    partial = answer + ".partial"
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as handle:
        json.dump(reply, handle)
    os.rename(partial, answer)
try:
    _torchleak_attach_eval(__CODE__, __ANSWER__)
finally:
    del _torchleak_attach_eval
'''


def remote_script(code: str, answer: Path) -> str:
    """The script the target runs: ``code`` evaluated, its answer written to ``answer``."""
    return SCRIPT.replace("__ANSWER__", repr(str(answer))).replace("__CODE__", repr(code), 1)


def remote_eval(pid: int, code: str, timeout: float) -> dict[str, Any]:
    """Run ``code`` in process ``pid`` through ``sys.remote_exec``; a reply like the
    control socket's."""
    remote_exec = getattr(sys, "remote_exec", None)
    if sys.version_info < (3, 14) or remote_exec is None:
        raise AttachUnavailable(
            f"process {pid} is not recorded by torchleak; running code in other Python "
            f"processes needs Python 3.14 or newer (sys.remote_exec), this is "
            f"{sys.version_info.major}.{sys.version_info.minor}. Start the program with "
            "`torchleak run` (or torchleak.monitor()) and attach to its run instead")
    folder = Path(tempfile.mkdtemp(prefix="torchleak-attach-"))  # 0700, ours
    try:
        script, answer = folder / "eval.py", folder / "answer.json"
        fd = os.open(script, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as handle:
            handle.write(remote_script(code, answer))
        try:
            remote_exec(pid, str(script))
        except PermissionError as err:
            raise AttachRefused(f"not allowed to reach into process {pid} ({err}); the "
                                "kernel's ptrace rules apply (see "
                                "/proc/sys/kernel/yama/ptrace_scope)") from None
        except (OSError, RuntimeError, ValueError) as err:
            raise AttachUnavailable(f"cannot run code in process {pid}: {err}") from None
        return _wait_for(answer, pid, timeout)
    finally:
        shutil.rmtree(folder, ignore_errors=True)  # withdraws a script that has not run


def _wait_for(answer: Path, pid: int, timeout: float) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if answer.exists():
            with open(answer) as handle:
                reply: dict[str, Any] = json.load(handle)
            return reply
        time.sleep(POLL_SECONDS)
    raise AttachUnavailable(f"process {pid} did not reach a point where Python can run the "
                            f"code within {timeout:g} s (blocked in C code?); the code was "
                            "withdrawn")
