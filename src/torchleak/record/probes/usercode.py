"""Tell the user's code from libraries, so holders are named from roots the user wrote."""

from __future__ import annotations

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


def is_user_file(filename: str) -> bool:
    if not filename or filename.startswith("<"):
        return False
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


def user_modules() -> list[tuple[str, ModuleType]]:
    """(display name, module) for __main__ and modules loaded from the user's files."""
    found = []
    for name, module in list(sys.modules.items()):
        filename = getattr(module, "__file__", None)
        if filename and is_user_file(filename) and name != "__mp_main__":
            display = name
            if name == "__main__":
                display = os.path.splitext(os.path.basename(filename))[0]
            found.append((display, module))
    return found
