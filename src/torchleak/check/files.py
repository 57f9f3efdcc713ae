"""Find the files to check: walk directories safely (no symlink loops, default
excludes such as ``.git`` and ``site-packages``) and read them without raising."""

from __future__ import annotations

import errno
import fnmatch
import os
import stat
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

DEFAULT_EXCLUDES = (
    ".bzr", ".direnv", ".eggs", ".git", ".git-rewrite", ".hg", ".ipynb_checkpoints",
    ".mypy_cache", ".nox", ".pants.d", ".pyenv", ".pytest_cache", ".pytype", ".ruff_cache",
    ".svn", ".tox", ".venv", ".vscode", "__pypackages__", "__pycache__", "_build",
    "buck-out", "dist", "node_modules", "site-packages", "venv", ".torchleak",
)
SOURCE_SUFFIXES = (".py", ".pyi", ".ipynb")


@dataclass(frozen=True)
class Candidate:
    path: str  # as shown to the user
    error: str = ""  # why it cannot be checked (missing, broken link); empty when fine


def excluded(path: str, patterns: Iterable[str]) -> bool:
    name = os.path.basename(path.rstrip(os.sep)) or path
    norm = path.replace(os.sep, "/")
    for pattern in patterns:
        pat = pattern.rstrip("/")
        if fnmatch.fnmatch(name, pat) or fnmatch.fnmatch(norm, pat) \
                or fnmatch.fnmatch(norm, f"*/{pat}") or fnmatch.fnmatch(norm, f"{pat}/*"):
            return True
    return False


def discover(paths: Iterable[str], exclude: Iterable[str] = (),
             skip: Callable[[str], bool] | None = None) -> Iterator[Candidate]:
    """Explicit files are always checked; directories are walked, sorted, no symlinked
    directories followed (which makes symlink loops impossible). ``skip`` excludes more of
    what the walk finds (the nearest configuration's own ``exclude``)."""
    patterns = tuple(DEFAULT_EXCLUDES) + tuple(exclude)
    seen: set[str] = set()
    for raw in paths:
        if os.path.isdir(raw):
            for found in _walk(raw, patterns, skip):
                if found.path not in seen:
                    seen.add(found.path)
                    yield found
        elif raw not in seen:
            seen.add(raw)
            yield Candidate(raw, _unreadable_reason(raw))


def _walk(root: str, patterns: tuple[str, ...],
          skip: Callable[[str], bool] | None) -> Iterator[Candidate]:
    stack = [root]
    while stack:
        folder = stack.pop()
        try:
            with os.scandir(folder) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError:
            continue  # an unreadable folder: nothing in it can be checked
        subdirs: list[str] = []
        for entry in entries:
            path = entry.path
            if excluded(path, patterns) or (skip is not None and skip(path)):
                continue
            try:
                if entry.is_dir(follow_symlinks=False):
                    subdirs.append(path)
                elif entry.name.endswith(SOURCE_SUFFIXES):
                    if entry.is_file():
                        yield Candidate(path)
                    elif entry.is_symlink() and not os.path.exists(path):
                        yield Candidate(path, _unreadable_reason(path))
            except OSError:
                continue
        stack.extend(reversed(subdirs))


def _unreadable_reason(path: str) -> str:
    """Why a named path cannot be checked, or ``""`` when it can be opened."""
    try:
        os.stat(path)
    except OSError as err:
        if err.errno == errno.ELOOP:
            return "symbolic link loop"
        if os.path.islink(path):
            return "broken symbolic link"
        if err.errno == errno.ENOENT:
            return "no such file or directory"
        return err.strerror or type(err).__name__
    except ValueError as err:  # a NUL byte in the name
        return str(err)
    return ""


def read_bytes(path: str) -> tuple[bytes | None, str]:
    """The file's bytes, or ``(None, reason)``; never raises and never blocks: FIFOs,
    devices and sockets are refused without reading them."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as err:
        return None, "symbolic link loop" if err.errno == errno.ELOOP \
            else err.strerror or type(err).__name__
    except ValueError as err:
        return None, str(err)
    try:
        kind = os.fstat(fd).st_mode
        if not stat.S_ISREG(kind):
            return None, f"not a regular file ({_kind_name(kind)}); skipped"
        with os.fdopen(fd, "rb", closefd=False) as fh:
            return fh.read(), ""
    except OSError as err:
        return None, err.strerror or type(err).__name__
    except (ValueError, MemoryError) as err:
        return None, type(err).__name__
    finally:
        os.close(fd)


def _kind_name(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a named pipe"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISDIR(mode):
        return "a directory"
    return "not a plain file"
