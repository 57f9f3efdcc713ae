"""Write a fixed file back without ever leaving it half-written.

The new bytes go to a temporary file beside the real one (symbolic links resolved), which
then replaces it in one step, keeping its permission bits. Nothing is written when the
file changed since it was read.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile


def write_bytes(path: str, before: bytes, after: bytes) -> str | None:
    """Replace ``path``'s content ``before`` with ``after``; an error message or None."""
    real = os.path.realpath(path)
    try:
        info = os.stat(real)
        if not stat.S_ISREG(info.st_mode):
            return f"{path}: not a regular file; the fix is not written"
        with open(real, "rb") as fh:
            if fh.read() != before:
                return f"{path}: changed while it was being checked; the fix is not written"
        try:
            _replace_atomically(real, after, info)
        except PermissionError:  # the folder is read-only but the file is not
            with open(real, "r+b") as fh:
                fh.write(after)
                fh.truncate()
    except OSError as err:
        return f"{path}: cannot write the fix: {err.strerror or err}"
    return None


def _replace_atomically(real: str, data: bytes, info: os.stat_result) -> None:
    folder, name = os.path.split(real)
    fd, temp = tempfile.mkstemp(prefix=f".{name}.", suffix=".torchleak-fix", dir=folder)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(temp, stat.S_IMODE(info.st_mode))
        with contextlib.suppress(OSError):  # only root may give a file away
            os.chown(temp, info.st_uid, info.st_gid)
        os.replace(temp, real)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise
