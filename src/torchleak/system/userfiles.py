"""Tell the program's own files from libraries: the standard library, site-packages,
torch (wherever it is installed), the code torch.compile generates, and torchleak.

Holders are named from roots the user wrote, and on a death by signal the program's own
modules are finalised as python's teardown would (``live.runner``). Nothing here imports
torch: the answer is asked on the way out of programs that never did.
"""

from __future__ import annotations

import functools
import getpass
import importlib.util
import os
import re
import sys
import sysconfig
import tempfile

_TORCHLEAK_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _compiler_caches() -> set[str]:
    """Where torch.compile writes the code it generates (inductor's cache, by torch's own
    default): modules that are torch's, though they load from outside its folder."""
    found = {os.environ.get("TORCHINDUCTOR_CACHE_DIR", "")}
    try:
        user = re.sub(r'[\\/:*?"<>|]', "_", getpass.getuser())
    except (KeyError, OSError):  # no user name for this uid (a container)
        user = ""
    if user:
        found.add(os.path.join(tempfile.gettempdir(), f"torchinductor_{user}"))
    return {p for p in found if p}


def _torch_dir() -> str:
    """torch's folder, found without importing it."""
    torch = sys.modules.get("torch")
    origin = getattr(torch, "__file__", None)
    if not isinstance(origin, str):
        try:
            spec = importlib.util.find_spec("torch")
        except (ImportError, ValueError):
            spec = None
        origin = spec.origin if spec is not None else None
    return os.path.dirname(os.path.abspath(origin)) if isinstance(origin, str) else ""


@functools.lru_cache(maxsize=1)
def library_prefixes() -> tuple[str, ...]:
    paths = sysconfig.get_paths()
    prefixes = {paths.get(k, "") for k in ("stdlib", "platstdlib", "purelib", "platlib")}
    prefixes |= {_torch_dir(), _TORCHLEAK_DIR}
    prefixes |= _compiler_caches()
    prefixes |= {p for p in sys.path if p.endswith(("site-packages", "dist-packages"))}
    return tuple(sorted(os.path.abspath(p) + os.sep for p in prefixes if p))


@functools.lru_cache(maxsize=4096)
def is_user_file(filename: str) -> bool:
    if not filename or filename.startswith("<") or not os.path.isabs(filename):
        return False  # relative __file__ values come from odd module-like objects
    prefixes = library_prefixes()
    if filename.startswith(prefixes) and f"{os.sep}.." not in filename:
        return False  # already normal and inside a library: no path to normalise
    return not os.path.abspath(filename).startswith(prefixes)
