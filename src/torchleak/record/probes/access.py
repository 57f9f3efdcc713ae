"""Read user objects without running user code.

A holder walk must not change what it measures: calling a list subclass's ``__len__``
or ``__iter__``, a property, a ``__getattr__``/``__getattribute__``, a ``__repr__``, a
``__sizeof__`` or a tensor subclass's ``__torch_function__`` could consume random
numbers, take locks or allocate. Everything here goes through the C implementation of
the builtin base type (``list.__len__(obj)``, ``dict.items(obj)``), tests types with
``issubclass(type(obj), ...)`` (``isinstance`` may read ``obj.__class__``), and reads
attributes from the instance dict or slot descriptors only.

Frames get the same care: on Python <= 3.12 reading a function frame's ``f_locals``
writes a snapshot of its locals into the dict ``locals()`` returns in that frame (a dict
the program may hold, and where ``exec`` keeps the names it binds), and keeps a local
alive after the program deletes it. ``frame_locals`` reads the slots of the frames of its
own thread instead (``fastlocals``), and other frames only where that cannot be seen.
"""

from __future__ import annotations

import collections
import gc
import inspect
import sys
import threading
from collections.abc import Iterator
from types import FrameType, MemberDescriptorType
from typing import Any

from torchleak.record.probes import fastlocals

_DEQUE = collections.deque
# The builtin container types, most derived first where it matters (none derive here).
CONTAINER_TYPES: tuple[type, ...] = (list, tuple, dict, set, frozenset, _DEQUE)
_PEP667 = sys.version_info >= (3, 13)  # f_locals is a live view, no snapshot kept


def is_a(obj: Any, cls: type | tuple[type, ...]) -> bool:
    """``isinstance`` from the type alone (never reads ``obj.__class__``)."""
    return issubclass(type(obj), cls)


# The answers for the exact builtin types a walk meets most (a walk asks ~1,000 times):
# one dict lookup, safe because a class whose metaclass is ``type`` hashes by identity.
_BASE_OF_EXACT: dict[type, type | None] = {
    **{kind: kind for kind in CONTAINER_TYPES},
    **{kind: None for kind in (str, int, float, bool, complex, bytes, bytearray, type(None))}}
# The same exact builtin types: their ``sys.getsizeof`` is their own C ``__sizeof__``
# plus the GC header, what ``sizeof`` computes the long way.
_BUILTIN_SIZEOF = frozenset(_BASE_OF_EXACT)


def container_base(obj: Any) -> type | None:
    """The builtin container type ``obj`` is (or derives from), else None."""
    kind = type(obj)
    if type(kind) is type and kind in _BASE_OF_EXACT:
        return _BASE_OF_EXACT[kind]
    for base in CONTAINER_TYPES:
        if issubclass(kind, base):
            return base
    return None


def length(obj: Any) -> int:
    """``len(obj)`` through the builtin's own C ``__len__``."""
    base = container_base(obj)
    if base is None:
        raise TypeError(f"not a builtin container: {type(obj).__name__}")
    return base.__len__(obj)  # type: ignore[no-any-return]


def values(obj: Any) -> Iterator[Any]:
    """The elements (a dict's values) through the builtin's own iterator."""
    base = container_base(obj)
    if base is dict:
        return iter(dict.values(obj))
    if base is None:
        return iter(())
    return base.__iter__(obj)  # type: ignore[no-any-return, attr-defined]


def dict_pairs(obj: Any) -> Iterator[tuple[Any, Any]]:
    """A dict's (key, value) pairs through the builtin's own iterator."""
    return iter(dict.items(obj))


def newest_values(obj: Any, pairs: bool = False) -> Iterator[Any] | None:
    """A dict's or deque's elements newest first (their builtin reverse iterator starts at
    the end at no cost; a dict's (key, value) pairs with ``pairs``); None for a container
    with no order (a set)."""
    base = container_base(obj)
    if base is dict:
        return reversed(dict.items(obj)) if pairs else reversed(dict.values(obj))
    if base is _DEQUE:
        return _DEQUE.__reversed__(obj)
    return None


def dict_items(obj: Any) -> list[tuple[Any, Any]]:
    """A snapshot of a dict's items (a list, so the walk survives the dict changing)."""
    return list(dict.items(obj))


def element_at(obj: Any, index: int) -> Any:
    """``obj[index]`` for a list or tuple, through the builtin's ``__getitem__``."""
    base = container_base(obj)
    if base in (list, tuple, _DEQUE):
        return base.__getitem__(obj, index)  # type: ignore[union-attr]
    raise TypeError(f"cannot index {type(obj).__name__}")


def sizeof(obj: Any) -> int:
    """``sys.getsizeof`` without calling a user ``__sizeof__``: the builtin base's own."""
    kind = type(obj)
    if type(kind) is type and kind in _BUILTIN_SIZEOF:
        return sys.getsizeof(obj)
    for base in kind.__mro__:
        if base.__module__ in ("builtins", "_io", "array", "collections", "_collections"):
            method = base.__dict__.get("__sizeof__")
            if method is not None:
                try:
                    return int(method(obj)) + (16 if type(obj).__flags__ & (1 << 14) else 0)
                except Exception:  # noqa: BLE001 - an odd extension object
                    return 0
    return int(object.__sizeof__(obj))


def instance_dict(obj: Any) -> dict[str, Any] | None:
    """The instance ``__dict__``, read past any ``__getattribute__``/``__getattr__``."""
    try:
        found = object.__getattribute__(obj, "__dict__")
    except Exception:  # noqa: BLE001 - no __dict__ (slots, C objects)
        return None
    return found if type(found) is dict else None


def attribute(obj: Any, name: str, default: Any = None) -> Any:
    """An attribute stored on the instance (``__dict__`` or a slot), never computed."""
    attrs = instance_dict(obj)
    if attrs is not None and name in attrs:
        return attrs[name]
    for cls in type(obj).__mro__:
        slot = cls.__dict__.get(name)
        if type(slot) is MemberDescriptorType:
            try:
                return slot.__get__(obj, cls)
            except AttributeError:
                return default
    return default


def slot_values(obj: Any) -> dict[str, Any]:
    """Attributes of a ``__slots__`` instance, through the slot descriptors."""
    found: dict[str, Any] = {}
    for cls in type(obj).__mro__:
        names = cls.__dict__.get("__slots__", ())
        for name in (names,) if isinstance(names, str) else names:
            if name in found or name.startswith("__"):
                continue
            slot = cls.__dict__.get(name)
            if type(slot) is MemberDescriptorType:
                try:
                    found[name] = slot.__get__(obj, cls)
                except AttributeError:  # an unset slot
                    continue
    return found


def type_name(obj: Any) -> str:
    """``__qualname__`` of a function or method, else of the object's type."""
    kind = type(obj)
    qualname = getattr(obj, "__qualname__", None) if kind.__module__ == "builtins" else None
    return qualname if isinstance(qualname, str) else kind.__qualname__


def current_frames() -> dict[int, FrameType]:
    """``sys._current_frames()`` with the cyclic collector paused. On CPython 3.11 the call
    holds the interpreter's thread-list lock while it builds its dict; a collection started
    by that allocation can free a ``threading.local``, whose teardown takes the same lock,
    and the process hangs for good (seen: a training loop stopped at a holder walk). CPython
    gh-106883, fixed the same way from 3.11.9 and 3.12; earlier 3.11 releases need this.
    One caller at a time: the step timer's thread and a holder walk both read, and one's
    restore must not switch the collector back on during the other's read."""
    with _FRAMES_READ:
        enabled = gc.isenabled()
        gc.disable()
        try:
            return sys._current_frames()
        finally:
            if enabled:
                gc.enable()


_FRAMES_READ = threading.Lock()


def frame_locals(frame: FrameType) -> dict[str, Any]:
    """A copy of a frame's local variables that changes nothing the program can see.

    Python <= 3.12: a function frame's ``f_locals`` writes into the dict ``locals()``
    returns there. The frames of this thread's own stack (suspended under us: the
    training function) have their slots read directly (``fastlocals``). A frame another
    thread may run at any moment (its own stack, a generator) could change under such a
    read, so it goes through ``f_locals`` only when its code never looks at its own
    locals (no ``locals``, ``vars``, ``dir``, ``exec`` or ``eval`` in it) and the snapshot
    is emptied again; otherwise its locals are not read ({})."""
    code = frame.f_code
    if _PEP667 or not code.co_flags & inspect.CO_OPTIMIZED:
        # 3.13+: a live view. Module and class bodies: the namespace dict itself.
        return dict(frame.f_locals)
    if fastlocals.available and _on_this_stack(frame):
        return fastlocals.read(frame)
    if not _LOOKS_AT_LOCALS.isdisjoint(code.co_names):
        return {}
    snapshot = frame.f_locals
    copy = dict(snapshot)
    # References: the frame's own pointer, `snapshot`, and getrefcount's argument. More
    # means someone holds this dict: leave it as it is.
    if sys.getrefcount(snapshot) <= 3:
        snapshot.clear()
    del snapshot
    return copy


_LOOKS_AT_LOCALS = frozenset({"locals", "vars", "dir", "exec", "eval"})


def _on_this_stack(frame: FrameType) -> bool:
    here: FrameType | None = sys._getframe(1)
    while here is not None:
        if here is frame:
            return True
        here = here.f_back
    return False
