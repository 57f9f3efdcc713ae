"""The control server behind ``torchleak attach``: a Unix socket in the run folder.

Who can connect: the socket file is created 0600 inside a private 0700 folder and only
then linked into the run folder (no window in which it is wider, and no process-wide
umask change that could race the program's own threads); every peer's uid is checked
with ``SO_PEERCRED`` and anyone but the run's own user is refused. It is never a network
address. It is removed when the run ends; a socket left by a killed process answers
nothing, and ``attach`` says the run is gone.

What it costs: one thread blocked in ``poll`` (no wake-ups while nobody is attached)
and nothing on the training thread beyond the recorder's existing request-queue check.
The server threads never run user code: every command goes to the training thread
through ``Recorder.request`` (``control_jobs``) and is waited for with a timeout.
"""

from __future__ import annotations

import ast
import atexit
import contextlib
import os
import socket
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from torchleak.live.control_jobs import (Job, cleanup_action, eval_action, snapshot_action,
                                         walk_action)
from torchleak.live.control_protocol import (CHANGING_OPS, DEFAULT_TIMEOUT, MAX_TIMEOUT, OPS,
                                             PROTOCOL, SOCKET_NAME, LineReader, ProtocolError,
                                             control_mode, decode, encode, truncate,
                                             wait_readable)
from torchleak.live.control_socket import MAX_SESSIONS, listen, peer_of

if TYPE_CHECKING:
    from torchleak.record.session import Recorder
    from torchleak.report import Report

POLL_SECONDS = 0.05  # while a command waits: how often a cancel from the client is noticed
LiveReport = Callable[[], "Report | None"]


def start_control(recorder: Recorder, folder: Path, option: bool | None,
                  live_report: LiveReport, say: Callable[[str], None] | None = None
                  ) -> ControlServer | None:
    """Serve the run folder's control socket; None (and the reason in the trace) when
    control is off or cannot be served, then also one line through ``say`` unless it was
    turned off on purpose. Never raises."""
    mode = control_mode(option)
    meta: dict[str, Any] = {"mode": mode, "protocol": PROTOCOL, "pid": os.getpid()}
    server = None
    if mode == "off":
        meta["reason"] = "TORCHLEAK_CONTROL=off"
    elif not hasattr(socket, "AF_UNIX") or not hasattr(socket, "SO_PEERCRED"):
        meta["reason"] = "this platform cannot tell who connects (no SO_PEERCRED)"
    else:
        server = ControlServer(recorder, folder, mode, live_report)
        try:
            server.start()
            meta["socket"] = SOCKET_NAME
        except Exception as err:  # noqa: BLE001 - attach is optional, the run is not
            server.stop()
            server = None
            meta["reason"] = f"{type(err).__name__}: {err}"
    if server is None:
        recorder.out.event("attach", "server", f"no control socket: {meta.get('reason')}")
        if mode != "off" and say is not None:
            say(f"torchleak: attach is off for this run: no control socket at "
                f"{folder / SOCKET_NAME} ({meta.get('reason')}); the training goes on")
    recorder.writer.set_meta("control", meta)
    recorder.writer.flush()  # attach reads it to explain a missing socket
    return server


class ControlServer:
    def __init__(self, recorder: Recorder, folder: Path, mode: str,
                 live_report: LiveReport) -> None:
        self.path = folder / SOCKET_NAME
        self.folder = folder
        self.mode = mode
        self._recorder = recorder
        self._live_report = live_report
        self._listener: socket.socket | None = None
        self._inode: int | None = None
        self._wake_r, self._wake_w = os.pipe()
        self._closing = threading.Event()
        self._lock = threading.Lock()
        self._sessions: set[socket.socket] = set()
        self._jobs: set[Job] = set()
        self._answering = 0  # requests read and not yet answered
        self._pid = os.getpid()
        self._count = 0
        self._thread = threading.Thread(target=self._accept_loop, name="torchleak-control",
                                        daemon=True)

    # lifecycle -------------------------------------------------------------------------
    def start(self) -> None:
        self._listener = listen(self.path)
        self._inode = os.stat(self.path).st_ino
        os.register_at_fork(after_in_child=_close_in_child(weakref.ref(self)))
        atexit.register(self._remove_socket)
        self._thread.start()

    def stop(self) -> None:
        """Remove the socket, cancel what has not run, hang up on every client."""
        if self._closing.is_set():
            return
        self._closing.set()
        with contextlib.suppress(OSError):
            if self._wake_w >= 0:
                os.write(self._wake_w, b"x")
        self._remove_socket()
        atexit.unregister(self._remove_socket)
        with self._lock:
            jobs, sessions = list(self._jobs), list(self._sessions)
        for job in jobs:
            job.cancel("the run ended first")
        deadline = time.monotonic() + 1.0
        while self._answering and time.monotonic() < deadline:
            time.sleep(0.01)  # let each waiting client hear why its command did not run
        for conn in sessions:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout=2)
        self._close_fds()

    def _remove_socket(self) -> None:
        """Unlink our socket: only in this process, and only if it is still ours."""
        if os.getpid() != self._pid or self._inode is None:
            return
        with contextlib.suppress(OSError):
            if os.stat(self.path).st_ino == self._inode:
                os.unlink(self.path)
        self._inode = None

    def _close_fds(self) -> None:
        """Once: a closed descriptor's number may belong to someone else's file later."""
        if self._listener is not None:
            self._listener.close()
        fds, self._wake_r, self._wake_w = (self._wake_r, self._wake_w), -1, -1
        for fd in fds:
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)

    def forget_in_child(self) -> None:
        """A forked child (a DataLoader worker) must not keep our socket open."""
        self._inode = None
        self._closing.set()
        self._close_fds()
        for conn in list(self._sessions):
            conn.close()

    # connections ---------------------------------------------------------------------
    def _accept_loop(self) -> None:
        listener, wake = self._listener, self._wake_r
        assert listener is not None
        while not self._closing.is_set():
            try:
                if wake in wait_readable([listener.fileno(), wake], None) or (
                        self._closing.is_set()):
                    return
                conn, _ = listener.accept()
            except (OSError, ValueError):  # ValueError: closed under us
                if self._closing.is_set():
                    return
                time.sleep(0.1)  # EMFILE and friends: try again, never spin
                continue
            self._count += 1
            threading.Thread(target=self._session, args=(conn,), daemon=True,
                             name=f"torchleak-attach-{self._count}").start()

    def _session(self, conn: socket.socket) -> None:
        try:
            self._serve(conn)
        except Exception as err:  # noqa: BLE001 - a broken session never reaches the program
            self._log("session", f"session failed: {type(err).__name__}: {err}")

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            pid, uid = peer_of(conn)
            refusal = self._refusal(uid)
            if refusal:
                self._log("session", f"refused pid {pid} uid {uid}: {refusal}")
                _send(conn, {"kind": "refused", "error": refusal})
                return
            with self._lock:
                self._sessions.add(conn)
            try:
                if _send(conn, {"kind": "hello", **self._status()}):
                    self._converse(conn, pid)
            finally:
                with self._lock:
                    self._sessions.discard(conn)

    def _refusal(self, uid: int) -> str | None:
        if uid != os.geteuid():
            return "this run belongs to another user; only its own user may attach"
        if len(self._sessions) >= MAX_SESSIONS:
            return f"{MAX_SESSIONS} clients are attached already; try again later"
        return None

    def _converse(self, conn: socket.socket, pid: int) -> None:
        reader = LineReader(conn)
        while not self._closing.is_set():
            try:
                line = reader.readline()
            except (OSError, ProtocolError) as err:  # a line over the limit: hang up
                _send(conn, {"ok": False, "state": "error", "error": str(err)})
                return
            if line is None:
                return
            with self._lock:
                self._answering += 1
            try:
                reply = self._answer(line, reader, pid)
                if reply is None or not _send(conn, reply):
                    return
            finally:
                with self._lock:
                    self._answering -= 1

    def _answer(self, line: bytes, reader: LineReader, pid: int) -> dict[str, Any] | None:
        try:
            return self._handle(decode(line), reader, f"pid {pid}")
        except ProtocolError as err:
            self._log("session", f"pid {pid}: bad request: {err}")
            return {"ok": False, "state": "error", "error": str(err)}

    # commands --------------------------------------------------------------------------
    def _handle(self, msg: dict[str, Any], reader: LineReader, who: str
                ) -> dict[str, Any] | None:
        op, base = msg.get("op"), {"id": msg.get("id"), "op": msg.get("op")}
        if op == "status":
            self._log("status", f"{who}: status")
            return {**base, "ok": True, "state": "done", **self._status()}
        refusal = self._refuse_op(op)
        job = self._job(str(op), msg, who) if refusal is None else refusal
        if isinstance(job, str):
            self._log(str(op)[:20], f"{who}: {str(op)[:20]} refused: {job}")
            state = "refused" if op in CHANGING_OPS and refusal else "error"
            return {**base, "ok": False, "state": state, "error": job}
        with self._lock:
            self._jobs.add(job)
        try:
            self._recorder.request(job)
            if self._closing.is_set():  # stop() may have missed it
                job.cancel("the run ended first")
            return {**base, **self._wait(job, _timeout(msg), reader)}
        except _ClientGone:
            return None
        finally:
            job.cancel("the client went away")  # a no-op once it has run or was cancelled
            with self._lock:
                self._jobs.discard(job)
            # Off the training thread: the log line (and a walk's or snapshot's rows) are
            # in the trace by the time the client has its answer.
            self._recorder.writer.flush()

    def _refuse_op(self, op: Any) -> str | None:
        if op not in OPS:
            return f"unknown command {op!r}: one of {', '.join(OPS)}"
        if op in CHANGING_OPS and self.mode != "full":
            return (f"{op} is off in this run (it was started with --no-control, "
                    "monitor(control=False) or TORCHLEAK_CONTROL=0); walk, snapshot and "
                    "status still work")
        return None

    def _job(self, op: str, msg: dict[str, Any], who: str) -> Job | str:
        """The job for ``op``, or what is wrong with the request."""
        recorder = self._recorder
        if op == "eval":
            code = msg.get("code")
            if not isinstance(code, str) or not code.strip():
                return "eval needs code: a non-empty string"
            try:
                ast.parse(code, "<attach>", "exec")  # a syntax error needs no boundary
            except SyntaxError as err:
                return f"SyntaxError: {err.msg} (line {err.lineno})"
            action, title = eval_action(code), f"eval {truncate(code, 300)!r}"
        elif op == "walk":
            action, title = walk_action(recorder), "walk"
        elif op == "snapshot":
            action, title = snapshot_action(recorder, self.folder), "snapshot"
        else:
            action, title = cleanup_action(recorder), "cleanup"
        return Job(op, action, f"{who}: {title}", lambda text: self._log(op, text),
                   lambda: recorder.step)

    def _wait(self, job: Job, timeout: float, reader: LineReader) -> dict[str, Any]:
        """Wait for the boundary that runs ``job``; answer for it whatever happens."""
        deadline = job.requested_at + timeout
        while not job.done.wait(POLL_SECONDS):
            if reader.pending():
                self._client_message(job, reader)
            if time.perf_counter() >= deadline:
                if job.cancel(f"no step boundary within {timeout:g} s"):
                    break
                return {"ok": False, "state": "running", "error": (
                    f"started at step {job.requested_step + 1:,} and still running after "
                    f"{timeout:g} s; it runs to its end on the training thread and its "
                    "result is logged in the trace (events, kind 'attach')")}
        if job.state != "done":
            return _cancelled(job)
        result = dict(job.result)
        if job.op == "walk" and result.get("ok"):
            result.update(self._live_findings())
        return {"state": "done", **result}

    def _client_message(self, job: Job, reader: LineReader) -> None:
        """While a command waits the client may only cancel it or hang up."""
        try:
            line = reader.readline(timeout=0)
            if line is None:
                raise _ClientGone
            if decode(line).get("op") == "cancel":
                job.cancel("cancelled by the client")
        except (TimeoutError, ProtocolError):
            return  # half a line, or not ours: the command goes on waiting
        except OSError:
            raise _ClientGone from None

    def _live_findings(self) -> dict[str, Any]:
        report = self._live_report()
        if report is None:
            return {"findings": [], "verdict": None}
        return {"findings": [asdict(f) for f in report.findings], "verdict": report.verdict,
                "reason": report.reason, "as_of_step": report.steps}

    def _status(self) -> dict[str, Any]:
        meta = self._recorder.metadata
        ops = [op for op in OPS if self.mode == "full" or op not in CHANGING_OPS]
        return {"pid": self._pid, "run": meta.get("name"), "rank": meta.get("rank"),
                "step": self._recorder.step, "mode": self.mode, "ops": ops,
                "timeout": DEFAULT_TIMEOUT, "torch": self._recorder.torch_attached}

    def _log(self, source: str, message: str) -> None:
        self._recorder.out.event("attach", source, message)


class _ClientGone(Exception):
    """The client hung up while its command waited."""


def _cancelled(job: Job) -> dict[str, Any]:
    timed_out = job.why.startswith("no step boundary")
    state = "timeout" if timed_out else ("ended" if "run ended" in job.why else "cancelled")
    text = f"{job.op} did not run: {job.why}"
    if timed_out:
        text += (f" (still at step {job.requested_step:,}): the training loop is inside a long "
                 "step, blocked in C code, or between epochs or phases without steps. It was "
                 "cancelled and will not run later; try again, or pass a longer --timeout")
    return {"ok": False, "state": state, "error": text}


def _timeout(msg: dict[str, Any]) -> float:
    value = msg.get("timeout", DEFAULT_TIMEOUT)
    if not isinstance(value, (int, float)) or value != value or value <= 0:
        return DEFAULT_TIMEOUT
    return float(min(value, MAX_TIMEOUT))


def _send(conn: socket.socket, message: dict[str, Any]) -> bool:
    try:
        conn.sendall(encode(message))
        return True
    except OSError:
        return False


def _close_in_child(server: weakref.ref[ControlServer]) -> Callable[[], None]:
    def forget() -> None:
        alive = server()
        if alive is not None:
            alive.forget_in_child()

    return forget
