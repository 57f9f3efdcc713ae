"""The client side of ``torchleak attach``: find a live run's control socket, connect,
and exchange protocol messages (``torchleak.live.control_protocol``).

Every way this can fail ends in one line that says what is going on: no such run, a run
that has ended, a socket left by a killed process, another user's run, control off.

Nothing is sent before the client knows it speaks to the run's own user: the folder must
be ours and writable by nobody else (or another user could have put a socket there), the
socket must be ours and the trace's owner's, and the kernel must say (``SO_PEERCRED``)
that the process listening on it is ours.
"""

from __future__ import annotations

import contextlib
import grp
import os
import pwd
import socket
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from torchleak.errors import (AttachRefused, AttachUnavailable, InputNotFound,
                              TorchleakError, UsageError)
from torchleak.live.control_protocol import (SOCKET_NAME, LineReader, ProtocolError, decode,
                                             encode, reachable)
from torchleak.trace.schema import LOCK_FILENAME, TRACE_FILENAME
from torchleak.views.inert import shown

CONNECT_SECONDS = 5.0  # for the run's hello: a live run answers in milliseconds
REPLY_MARGIN = 5.0  # beyond the command's own timeout, for the reply to arrive


@dataclass(frozen=True)
class AttachTarget:
    folder: Path  # the folder holding the trace and the socket (a rank folder under torchrun)
    pid: int | None = None

    @property
    def socket_path(self) -> Path:
        return self.folder / SOCKET_NAME

    @property
    def trace(self) -> Path:
        return self.folder / TRACE_FILENAME


class ConnectionLost(AttachUnavailable):
    """The run hung up: it has ended or is ending."""


class NotRecorded(Exception):
    """A live process of ours that no torchleak Monitor records."""

    def __init__(self, pid: int) -> None:
        super().__init__(pid)
        self.pid = pid


def resolve_target(run: str, runs_dir: Path | None, rank: int | None) -> AttachTarget:
    """RUN as a run folder (or trace), a run name in the runs folder, or a pid."""
    from torchleak.trace.catalog import resolve_run

    path = Path(run)
    if not path.exists() and run.isdigit():
        return target_of_pid(int(run))
    if path.is_file() and rank is None:  # a trace file names its own (rank) folder
        return AttachTarget(path.parent)
    found = resolve_run(run, runs_dir)
    traces = {found.rank_of(t): t for t in found.traces}
    if rank is None:
        return AttachTarget(found.traces[0].parent)
    if rank not in traces:
        ranks = ", ".join(str(r) for r in traces if r is not None) or "none"
        raise UsageError(f"no rank {rank} in {found.path} (ranks: {ranks})")
    return AttachTarget(traces[rank].parent)


def target_of_pid(pid: int) -> AttachTarget:
    """The run folder a process records into: the trace lock it holds open."""
    proc = Path(f"/proc/{pid}")
    try:
        owner = proc.stat().st_uid
    except FileNotFoundError:
        raise InputNotFound(f"no process {pid}: it may have ended (see `torchleak ls`)") from None
    except OSError as err:
        raise AttachUnavailable(f"cannot look at process {pid}: {err.strerror or err}") from None
    if owner != os.geteuid():
        raise AttachRefused(f"process {pid} belongs to another user: only its own user may "
                            "attach to it")
    try:
        links = [link for fd in (proc / "fd").iterdir() if (link := _link(fd))]
    except OSError as err:
        raise AttachUnavailable(f"cannot list the files of process {pid}: "
                                f"{err.strerror or err}") from None
    for link in links:
        if link.endswith(f"/{LOCK_FILENAME}"):
            return AttachTarget(Path(link).parent, pid)
    raise NotRecorded(pid)


def _link(fd: Path) -> str | None:
    """Where an open file descriptor points; None for one closed while we looked."""
    try:
        return os.readlink(fd)
    except FileNotFoundError:
        return None


class Client:
    """One connection to a run's control socket; a context manager."""

    def __init__(self, target: AttachTarget) -> None:
        self.target = target
        self._sock = _connect(target)
        self._reader = LineReader(self._sock)
        self._next_id = 0
        try:
            self.hello = self._read(CONNECT_SECONDS, "the run's greeting")
        except BaseException:
            self.close()
            raise
        if self.hello.get("kind") == "refused":
            self.close()
            raise AttachRefused(f"the run refused: {shown(str(self.hello.get('error')))}")

    def request(self, op: str, timeout: float, **fields: Any) -> dict[str, Any]:
        """Send one command and wait for its reply; Ctrl-C asks the run to cancel it."""
        self._next_id += 1
        ident = self._next_id
        self._send({"id": ident, "op": op, "timeout": timeout, **fields})
        try:
            return self._read(timeout + REPLY_MARGIN, f"the answer to {op}")
        except KeyboardInterrupt:
            self._send({"id": ident, "op": "cancel"})
            return self._read(REPLY_MARGIN, f"the answer to cancelling {op}")

    def _send(self, message: dict[str, Any]) -> None:
        try:
            self._sock.sendall(encode(message))
        except OSError as err:
            raise ConnectionLost(f"the run hung up ({err.strerror or err}): it may have "
                                 "ended") from None

    def _read(self, timeout: float, what: str) -> dict[str, Any]:
        try:
            line = self._reader.readline(timeout)
        except TimeoutError:
            raise AttachUnavailable(f"no answer from the run within {timeout:g} s waiting for "
                                    f"{what}: is its process stopped (Ctrl-Z, a debugger)?"
                                    ) from None
        except (OSError, ProtocolError) as err:
            raise ConnectionLost(f"the connection to the run broke: {err}") from None
        if line is None:
            raise ConnectionLost("the run closed the connection: it has ended or is ending")
        try:
            return decode(line)
        except ProtocolError as err:
            raise AttachUnavailable(f"the run answered something unexpected: {err}") from None

    def close(self) -> None:
        self._sock.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def check_owner(target: AttachTarget) -> None:
    """Refuse a socket another user could have put in place: before connecting."""
    me, folder, path = os.geteuid(), target.folder, target.socket_path
    try:
        where = os.stat(folder)
        found = os.lstat(path)
    except FileNotFoundError:
        return  # _connect says what is missing
    except OSError as err:
        raise AttachUnavailable(f"cannot look at {path}: {err.strerror or err}") from None
    if where.st_uid not in (me, 0):
        raise AttachRefused(f"{folder} belongs to {_user(where.st_uid)}, not to you: "
                            "attach sends code only to a run in a folder of your own")
    shared = _writable_by_others(where)
    if shared:
        raise AttachRefused(f"{folder} is writable by {shared}, so the socket in it may not "
                            f"be the run's: attach refuses to send anything there. Make it "
                            f"private (chmod go-w {folder}) or record into a private folder "
                            "(--out)")
    if not stat.S_ISSOCK(found.st_mode):
        raise AttachRefused(f"{path} is not a socket (a link or a file put there): refusing "
                            "to connect")
    if found.st_uid != me:
        raise AttachRefused(f"{path} belongs to {_user(found.st_uid)}: only the run's own "
                            "user may attach, and the socket is not yours")
    with contextlib.suppress(OSError):
        owner = os.lstat(target.trace).st_uid
        if owner != me:
            raise AttachRefused(f"the run in {folder} belongs to {_user(owner)}: only its "
                                "own user may attach")


def _writable_by_others(info: os.stat_result) -> str | None:
    """Who else may create files in a folder: None, 'everyone' or 'group NAME'. A group
    of the user's own (the user private group of most Linux systems) is not others."""
    if info.st_mode & stat.S_IWOTH:
        return "everyone"
    if not info.st_mode & stat.S_IWGRP:
        return None
    try:
        group = grp.getgrgid(info.st_gid)
        mine = pwd.getpwuid(os.geteuid()).pw_name
    except KeyError:
        return f"group {info.st_gid}"
    if group.gr_name == mine and set(group.gr_mem) <= {mine}:
        return None
    return f"group {group.gr_name}"


def _user(uid: int) -> str:
    try:
        return f"user {pwd.getpwuid(uid).pw_name}"
    except KeyError:
        return f"uid {uid}"


def _check_peer(sock: socket.socket, target: AttachTarget) -> None:
    """The kernel's word on who listens: the run's own user, or nothing is sent."""
    from torchleak.live.control_socket import peer_of

    try:
        pid, uid = peer_of(sock)
    except OSError as err:
        raise AttachUnavailable(f"cannot tell who serves {target.socket_path}: "
                                f"{err.strerror or err}") from None
    if uid != os.geteuid():
        raise AttachRefused(f"{target.socket_path} is served by process {pid} of "
                            f"{_user(uid)}, not by your run: refusing to talk to it")


def _connect(target: AttachTarget) -> socket.socket:
    check_owner(target)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(CONNECT_SECONDS)
    try:
        with reachable(target.socket_path) as name:
            sock.connect(name)
    except FileNotFoundError:
        sock.close()
        raise AttachUnavailable(_no_socket(target)) from None
    except ConnectionRefusedError:
        sock.close()
        raise AttachUnavailable(f"the run in {target.folder} is gone: its control socket was "
                                f"left by a process that ended without removing it (killed?)"
                                f"{_status_note(target)}") from None
    except PermissionError:
        sock.close()
        raise AttachRefused(f"permission denied on {target.socket_path}: the run belongs to "
                            "another user; only its own user may attach") from None
    except OSError as err:
        sock.close()
        raise AttachUnavailable(f"cannot connect to {target.socket_path}: "
                                f"{err.strerror or err}") from None
    try:
        _check_peer(sock, target)
    except BaseException:
        sock.close()
        raise
    sock.settimeout(None)
    return sock


def _run_meta(target: AttachTarget) -> tuple[str | None, dict[str, Any]]:
    """(status, meta) of the run's trace; (None, {}) when it cannot be read."""
    from torchleak.trace.catalog import run_status
    from torchleak.trace.reader import open_trace, read_meta

    try:
        with open_trace(target.trace) as trace:
            meta = read_meta(trace.conn)
        return run_status(meta, target.trace).value, meta
    except (TorchleakError, OSError):
        return None, {}


def _status_note(target: AttachTarget) -> str:
    status, _meta = _run_meta(target)
    return f"; the trace says: {status}" if status else ""


def _no_socket(target: AttachTarget) -> str:
    status, meta = _run_meta(target)
    if status is None:
        return f"no run in {target.folder}: it has no readable trace"
    if status != "running":
        return (f"the run in {target.folder} is not running (status: {status}); attach works "
                f"while a run goes on (its trace: `torchleak report {target.folder}`)")
    control = meta.get("control") if isinstance(meta.get("control"), dict) else None
    if control is None:
        return (f"the run in {target.folder} serves no control socket: it is starting, or was "
                "started by a torchleak without attach")
    return f"the run in {target.folder} serves no control socket: {control.get('reason')}"
