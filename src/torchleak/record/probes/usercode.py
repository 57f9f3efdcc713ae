"""Tell the user's code from libraries, so holders are named from roots the user wrote."""

from __future__ import annotations

import functools
import os
import sys
import sysconfig
from types import FrameType, ModuleType

import torch

_TORCHLEAK_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _library_prefixes() -> tuple[str, ...]:
    paths = sysconfig.get_paths()
    prefixes = {paths.get(k, "") for k in ("stdlib", "platstdlib", "purelib", "platlib")}
    prefixes |= {os.path.dirname(os.path.abspath(torch.__file__)), _TORCHLEAK_DIR}
    prefixes |= {p for p in sys.path if p.endswith(("site-packages", "dist-packages"))}
    return tuple(sorted(os.path.abspath(p) + os.sep for p in prefixes if p))


_LIBRARY = _library_prefixes()


@functools.lru_cache(maxsize=4096)
def is_user_file(filename: str) -> bool:
    if not filename or filename.startswith("<") or not os.path.isabs(filename):
        return False  # relative __file__ values come from odd module-like objects
    path = os.path.abspath(filename)
    return not path.startswith(_LIBRARY)


def user_frames(frame: FrameType | None) -> list[FrameType]:
    """User frames on the stack, innermost first."""
    frames = []
    while frame is not None:
        if is_user_file(frame.f_code.co_filename):
            frames.append(frame)
        frame = frame.f_back
    return frames


_modules_cache: tuple[int, list[tuple[str, ModuleType]]] = (-1, [])


def user_modules() -> list[tuple[str, ModuleType]]:
    """(display name, module) for __main__ and modules loaded from the user's files.

    Scanning sys.modules costs ~25 ms with torch loaded, so the answer is kept until the
    number of loaded modules changes."""
    global _modules_cache
    count = len(sys.modules)
    if _modules_cache[0] != count:
        _modules_cache = (count, _scan_user_modules())
    return _modules_cache[1]


def _scan_user_modules() -> list[tuple[str, ModuleType]]:
    found = []
    for name, module in list(sys.modules.items()):
        filename = getattr(module, "__file__", None)
        if isinstance(module, ModuleType) and isinstance(filename, str) and is_user_file(filename) and name != "__mp_main__":
            display = name
            if name == "__main__":
                display = os.path.splitext(os.path.basename(filename))[0]
            found.append((display, module))
    return found
