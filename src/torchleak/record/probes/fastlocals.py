"""A function frame's local variables read without ``frame.f_locals`` (Python 3.10-3.12).

On these versions ``frame.f_locals`` of a function frame runs ``PyFrame_FastToLocals``:
it writes the current values into the one dict that ``locals()`` returns in that frame.
A program that took ``d = locals()`` earlier sees names appear in ``d`` (``loss``), and a
name that only lives in that dict (bound by ``exec``) is at our mercy. So we read the
frame's fast-locals array directly, as the debugger-free tools (py-spy, austin) do, and
never touch the dict.

The layouts are those of CPython's own headers for each version; before the first use a
probe frame with known locals is read and compared object for object. On any mismatch,
an interpreter this was not written for, or a debug build, ``available`` is False and
the walk skips function locals (module globals, ``self`` attributes and everything
reachable from them are still walked).
"""

from __future__ import annotations

import ctypes
import sys
from types import CellType, CodeType, FrameType
from typing import Any

_PTR = ctypes.sizeof(ctypes.c_void_p)
_VERSION = sys.version_info[:2]
# (offset of f_frame in the frame object, of f_code / frame_obj / localsplus in the
# interpreter frame): Include/internal/pycore_frame.h of 3.11 and 3.12.
_LAYOUTS = {(3, 11): (3 * _PTR, 4 * _PTR, 5 * _PTR, 9 * _PTR),
            (3, 12): (3 * _PTR, 0, 6 * _PTR, 9 * _PTR)}
_OWN_DATA_AT = 6 * _PTR  # PyFrameObject._f_frame_data, 3.11 and 3.12
# Where the dict ``locals()`` returns is kept (NULL until someone asked): names ``exec``
# bound live only there.
_DICT_AT = {(3, 10): 7 * _PTR, (3, 11): 3 * _PTR, (3, 12): 5 * _PTR}
# 3.10: PyFrameObject itself (PyObject_VAR_HEAD, f_back, f_code, f_builtins, f_globals,
# f_locals, f_valuestack); the locals end where the value stack starts.
_CODE_310, _GLOBALS_310, _VALUESTACK_310 = 4 * _PTR, 6 * _PTR, 8 * _PTR


def _pointer(address: int) -> int:
    return ctypes.c_void_p.from_address(address).value or 0


def _object(address: int) -> Any:
    return ctypes.cast(ctypes.c_void_p(address), ctypes.py_object).value  # a new reference


def _names(code: CodeType) -> list[str]:
    """The names of the fast-locals slots, in order."""
    if _VERSION == (3, 10):
        return [*code.co_varnames, *code.co_cellvars, *code.co_freevars]
    extra_cells = [n for n in code.co_cellvars if n not in code.co_varnames]
    count = len(code.co_varnames) + len(extra_cells) + len(code.co_freevars)
    return [code._varname_from_oparg(i) for i in range(count)]  # type: ignore[attr-defined]


def _slots(frame: FrameType) -> tuple[int, int]:
    """The addresses of the frame's first fast-locals slot and of its locals-dict pointer,
    after checking the layout."""
    base, code = id(frame), frame.f_code
    if _VERSION == (3, 10):
        if _pointer(base + _CODE_310) != id(code) or (
                _pointer(base + _GLOBALS_310) != id(frame.f_globals)):
            raise LookupError("unexpected frame layout")
        count = len(code.co_varnames) + len(code.co_cellvars) + len(code.co_freevars)
        return _pointer(base + _VALUESTACK_310) - count * _PTR, base + _DICT_AT[_VERSION]
    frame_at, code_at, owner_at, locals_at = _LAYOUTS[_VERSION]
    inner = _pointer(base + frame_at)
    # A frame that has returned was copied into its frame object (which it then does not
    # point back to): its data sits right after the object's own fields.
    owner = _pointer(inner + owner_at) if inner else -1
    if not inner or _pointer(inner + code_at) != id(code) or not (
            owner == base or (owner == 0 and inner == base + _OWN_DATA_AT)):
        raise LookupError("unexpected frame layout")
    return inner + locals_at, inner + _DICT_AT[_VERSION]


def read(frame: FrameType) -> dict[str, Any]:
    """The bound local variables of a function frame, cells read through, and the names
    only the frame's locals dict holds (bound by ``exec``), read as they are."""
    code = frame.f_code
    start, dict_at = _slots(frame)
    cells = set(code.co_cellvars) | set(code.co_freevars)
    found: dict[str, Any] = {}
    for index, name in enumerate(_names(code)):
        address = _pointer(start + index * _PTR)
        if not address:
            continue  # unbound
        value = _object(address)
        if name in cells and type(value) is CellType:
            try:
                value = value.cell_contents
            except ValueError:  # an empty cell
                continue
        found[name] = value
    extra = _pointer(dict_at)
    if extra:
        names = set(_names(code))
        kept = _object(extra)
        if type(kept) is dict:
            found.update((k, v) for k, v in dict.items(kept) if k not in names)
    return found


def _probe() -> bool:
    """Read a frame whose locals are known; True when every one comes back as itself."""
    marker, kept = object(), [object()]

    def closure() -> list[object]:
        return kept

    def finished() -> FrameType:
        inside = marker  # noqa: F841 - read back below
        return sys._getframe()

    done = finished()
    if read(done).get("inside") is not marker:
        return False
    frame = sys._getframe()
    seen = read(frame)
    exec("bound = 1")  # noqa: S102 - puts the locals dict in place, then reads it as is
    dict_seen = read(frame)
    return (dict_seen.get("bound") == 1 and seen.get("marker") is marker and seen.get("kept") is kept
            and seen.get("closure") is closure and seen.get("frame") is frame)


def _available() -> bool:
    if _VERSION not in _LAYOUTS and _VERSION != (3, 10):
        return False
    if hasattr(sys, "gettotalrefcount") or sys.implementation.name != "cpython":
        return False  # a debug build (other object header) or another interpreter
    try:
        return _probe()
    except Exception:  # noqa: BLE001 - then we do without function locals
        return False


available = _available()
