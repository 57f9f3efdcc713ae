"""The control socket itself: created 0600 with no window in which it is wider, and the
kernel's word on who is at the other end.

The socket is bound inside a private 0700 folder, set to 0600 there, and only then
linked into the run folder. A process-wide ``umask`` would do the same for the creation,
but it would also apply, for that moment, to files the program's own threads create.
"""

from __future__ import annotations

import contextlib
import os
import socket
import struct
import tempfile
from pathlib import Path

from torchleak.live.control_protocol import SOCKET_NAME, reachable

MAX_SESSIONS = 8  # clients attached at once (and the listen backlog)


def peer_of(conn: socket.socket) -> tuple[int, int]:
    """(pid, uid) of the process at the other end, from the kernel (SO_PEERCRED)."""
    size = struct.calcsize("3i")
    pid, uid, _gid = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET,
                                                         socket.SO_PEERCRED, size))
    return pid, uid


def listen(path: Path) -> socket.socket:
    """A listening socket at ``path``, mode 0600 from the moment anyone can reach it."""
    _clear_stale(path)
    private = Path(tempfile.mkdtemp(prefix=".control-", dir=path.parent))  # mode 0700
    staged = private / SOCKET_NAME
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        with reachable(staged) as name:
            sock.bind(name)
        os.chmod(staged, 0o600)
        sock.listen(MAX_SESSIONS)  # before anyone can find it: a refusal means "gone"
        _publish(staged, path)
    except BaseException:
        sock.close()
        raise
    finally:
        with contextlib.suppress(OSError):
            os.unlink(staged)
        with contextlib.suppress(OSError):
            os.rmdir(private)
    return sock


def _clear_stale(path: Path) -> None:
    """A socket nobody answers on (a killed run's, in a reused folder) is removed."""
    if not path.exists() and not path.is_symlink():
        return
    if path.lstat().st_uid != os.geteuid():  # not even a probe goes to another user's
        raise FileExistsError(f"{path} exists and belongs to another user")
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        with reachable(path) as name:
            probe.connect(name)
    except ConnectionRefusedError:
        os.unlink(path)
        return
    except OSError:
        pass
    finally:
        probe.close()
    raise FileExistsError(f"{path} exists and is not a stale control socket")


def _publish(staged: Path, path: Path) -> None:
    """Move the socket into the run folder without replacing anything put there."""
    try:
        os.link(staged, path)
    except FileExistsError:
        raise
    except OSError:  # a file system without hard links
        if path.exists():
            raise FileExistsError(path) from None
        os.rename(staged, path)
