"""Tell the user's code from libraries, so holders are named from roots the user wrote."""

from __future__ import annotations

import os
import sys
import weakref
from collections.abc import Callable
from types import FrameType, ModuleType

from torchleak.record.probes import access
from torchleak.system.userfiles import is_user_file


def user_frames(frame: FrameType | None) -> list[FrameType]:
    """User frames on the stack, innermost first."""
    frames = []
    while frame is not None:
        if is_user_file(frame.f_code.co_filename):
            frames.append(frame)
        frame = frame.f_back
    return frames


def owner_frames(frame: FrameType | None, is_user_class: Callable[[type], bool]
                 ) -> list[FrameType]:
    """Library frames whose ``self`` is an object of the user's own class (a subclass of a
    framework's Trainer, a LightningModule running its library-defined hooks), innermost
    first, one per object: that object is the user's even though the code is not."""
    frames: list[FrameType] = []
    seen: set[int] = set()
    while frame is not None:
        code = frame.f_code
        if (code.co_argcount and code.co_varnames[0] == "self"
                and not is_user_file(code.co_filename)):
            owner = access.frame_locals(frame).get("self")
            if owner is not None and id(owner) not in seen and is_user_class(type(owner)):
                seen.add(id(owner))
                frames.append(frame)
            del owner
        frame = frame.f_back
    return frames


# Weak references: a module we cached must die when the program lets it go (at exit the
# script's module, kept alive by us, had its globals set to None before its objects'
# ``__del__`` ran, where under python they run with the globals intact).
_modules_cache: tuple[int, list[tuple[str, weakref.ref[ModuleType]]]] = (-1, [])


def user_modules() -> list[tuple[str, ModuleType]]:
    """(display name, module) for __main__ and modules loaded from the user's files.

    The first scan of sys.modules costs ~5 ms with torch and Lightning loaded (~3,000
    modules), so the answer is kept until the number of loaded modules changes."""
    global _modules_cache
    count = len(sys.modules)
    if _modules_cache[0] != count:
        _modules_cache = (count, [(name, weakref.ref(module))
                                  for name, module in _scan_user_modules()])
    return [(name, module) for name, ref in _modules_cache[1]
            if (module := ref()) is not None]


# Modules a scan found not to be the user's: name -> id of the module object. A later
# scan (the module count changes as a framework imports lazily: a few times in a
# Lightning run's first steps) looks only at the others, ~0.3 ms instead of ~1.3 ms
# with ~3,000 modules; a module replaced under its name (a reload) is looked at again.
_not_user: dict[str, int] = {}


def _scan_user_modules() -> list[tuple[str, ModuleType]]:
    found = []
    main = sys.modules.get("__main__")
    if isinstance(main, ModuleType) and not isinstance(getattr(main, "__file__", None), str):
        # Interactive: a notebook's (IPython's) namespace, `python -c`, the REPL.
        found.append(("notebook" if "IPython" in sys.modules else "__main__", main))
    modules = list(sys.modules.items())
    if len(_not_user) > 4 * len(modules):
        _not_user.clear()  # names of modules long gone
    for name, module in modules:
        if name.startswith("torch.") or name == "__mp_main__":  # most of sys.modules: cheap first
            continue
        if _not_user.get(name) == id(module):
            continue
        filename = getattr(module, "__file__", None)
        if not (isinstance(module, ModuleType) and isinstance(filename, str)
                and is_user_file(filename)):
            _not_user[name] = id(module)
            continue
        display = name
        if name == "__main__":
            display = os.path.splitext(os.path.basename(filename))[0]
        found.append((display, module))
    return found
