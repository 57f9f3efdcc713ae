"""Find the files to check: walk directories safely (no symlink loops, default
excludes such as ``.git`` and ``site-packages``) and read them without raising."""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Iterable, Iterator
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


def discover(paths: Iterable[str], exclude: Iterable[str] = ()) -> Iterator[Candidate]:
    """Explicit files are always checked; directories are walked, sorted, no symlinked
    directories followed (which makes symlink loops impossible)."""
    patterns = tuple(DEFAULT_EXCLUDES) + tuple(exclude)
    seen: set[str] = set()
    for raw in paths:
        if os.path.isdir(raw):
            for found in _walk(raw, patterns):
                if found.path not in seen:
                    seen.add(found.path)
                    yield found
        elif raw not in seen:
            seen.add(raw)
            if os.path.lexists(raw) and not os.path.exists(raw):
                yield Candidate(raw, "broken symbolic link")
            elif not os.path.lexists(raw):
                yield Candidate(raw, "no such file or directory")
            else:
                yield Candidate(raw)


def _walk(root: str, patterns: tuple[str, ...]) -> Iterator[Candidate]:
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
            if excluded(path, patterns):
                continue
            try:
                if entry.is_dir(follow_symlinks=False):
                    subdirs.append(path)
                elif entry.name.endswith(SOURCE_SUFFIXES):
                    if entry.is_file():
                        yield Candidate(path)
                    elif entry.is_symlink() and not os.path.exists(path):
                        yield Candidate(path, "broken symbolic link")
            except OSError:
                continue
        stack.extend(reversed(subdirs))


def read_bytes(path: str) -> tuple[bytes | None, str]:
    """The file's bytes, or ``(None, reason)``; never raises."""
    try:
        with open(path, "rb") as fh:
            return fh.read(), ""
    except OSError as err:
        return None, err.strerror or type(err).__name__
    except (ValueError, MemoryError) as err:
        return None, type(err).__name__
