"""Run a script or module exactly as ``python script.py`` / ``python -m mod`` would.

Same ``__main__``, ``sys.argv``, ``sys.path[0]``, cwd, standard streams, exit code and
death signal; an uncaught exception goes through ``sys.excepthook`` with torchleak's and
runpy's frames cut off, so the user sees the traceback Python would print. An uncaught
``KeyboardInterrupt`` ends the process by SIGINT, as Python does (``die_like_python``),
once torchleak has closed its trace.
"""

from __future__ import annotations

import atexit
import builtins
import gc
import importlib.machinery
import importlib.util
import os
import runpy
import sys
import threading
import traceback
import types
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from torchleak.errors import BadInput, InputNotFound
from torchleak.live.torch_import import when_torch_imported

_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_OUR_FILES = (_PACKAGE, os.path.abspath(runpy.__file__), runpy._run_code.__code__.co_filename)


@dataclass
class Target:
    """What to run: a script path or a module name, and its arguments."""

    script: Path | None
    module: str | None
    args: list[str]

    @property
    def display(self) -> str:
        return str(self.script) if self.script else f"-m {self.module}"

    @property
    def stem(self) -> str:
        return self.script.stem if self.script else (self.module or "run").split(".")[-1]


def validate(target: Target) -> None:
    """Fail before recording starts, with a message that says what to do."""
    if target.script is not None:
        path = target.script
        if not path.exists():
            raise InputNotFound(f"no such script: {path} (check the path; torchleak run runs "
                                "`python SCRIPT`, use `-m MODULE` for a module)")
        if path.is_dir():
            if (path / "__main__.py").exists():
                return
            raise InputNotFound(f"{path} is a directory: pass the training script inside it")
        try:
            source = path.read_bytes()
            compile(source, str(path), "exec")
        except SyntaxError as err:
            raise BadInput(f"{err.filename}:{err.lineno}: {err.msg} - fix the script "
                           "(`python SCRIPT` fails the same way)") from None
        except (OSError, ValueError) as err:
            raise BadInput(f"cannot read {path}: {err}") from None
    elif target.module is not None:
        sys.path.insert(0, os.getcwd())  # as `python -m` will have it
        try:
            spec = importlib.util.find_spec(target.module)
        except (ImportError, ValueError):
            spec = None
        finally:
            sys.path.pop(0)
        if spec is None:
            raise InputNotFound(f"no module named {target.module!r} (is its package installed "
                                "or the current folder on sys.path?)")


@dataclass
class Outcome:
    """How the program ended, the way the interpreter would report it."""

    code: int
    raised: bool  # an uncaught exception (traceback printed)
    signal: int | None = None  # die by this signal, as Python does for KeyboardInterrupt


def die_like_python(outcome: Outcome) -> None:
    """End the process by ``outcome.signal`` when Python would have (after our cleanup).

    Python dies by the signal only once it has finalised (``exit_sigint``): the program's
    ``atexit`` handlers run first (a checkpoint saved on Ctrl-C) and what its modules keep
    is finalised (a file never closed keeps what was written to it). Both happen here,
    before the signal."""
    if outcome.signal is None:
        return
    run_exit_handlers = getattr(atexit, "_run_exitfuncs", None)
    if run_exit_handlers is not None:
        run_exit_handlers()  # reports a failing handler as python does, and goes on
    try:
        finalise_program_modules()
    except Exception:  # noqa: BLE001 - never a traceback on the way out
        pass
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
    import signal

    signal.signal(outcome.signal, signal.SIG_DFL)
    # To this thread, delivered as the call returns: nothing of ours runs after it.
    signal.pthread_kill(threading.get_ident(), outcome.signal)
    os.kill(os.getpid(), outcome.signal)  # blocked in this thread: the process's way


def freeze_startup_objects() -> None:
    """Put objects that live to the end of the process out of the cyclic collector's sight
    (``gc.freeze``): the interpreter's start-up objects and torchleak's now, before the
    script starts, and torch's own once the program's ``import torch`` ends.

    Left in view, every full collection re-scanned them: the ~17,000 objects torchleak's
    modules add brought one more full collection forward once torch was loaded (~90 ms),
    and the ~166,000 torch's import leaves cost each full collection ~80 ms on a 2-core
    machine (a run of a few seconds makes five). The program's garbage is collected before
    each freeze, never frozen (torch's import's own few kB of cycles are). The script's
    objects made after its ``import torch`` are collected as under python. The limit:
    those it made before that line are frozen too, so one that later becomes garbage
    inside a reference cycle stays (freed by reference count it goes as usual); what a
    script makes above that line is almost always module-level state kept to its end. At
    exit everything frozen is put back in sight (the last ``atexit`` call), so the
    script's module and what it keeps are finalised as under python: frozen, an object's
    ``__del__`` at exit never ran, and a file the script never closed lost what it had
    buffered. The interpreter's teardown then costs what it costs under
    python (~0.25 s after ``import torch``; leaving it out needs the program's modules
    finalised first, and garbage torch's import leaves holds them: BENCHMARKS.md)."""
    _collect_then_freeze()
    # The program's garbage is collected as torch's import begins (the objects made since
    # the freeze above: few), not once it ends (166,000 of torch's: 65-75 ms, a run of a
    # few seconds' largest start-up cost); what torch's import leaves in cycles (~30
    # objects, ~3 kB) is frozen with the rest of it.
    when_torch_imported(gc.freeze, before=gc.collect)
    atexit.register(gc.unfreeze)


def finalise_program_modules() -> None:
    """What python's teardown finalises of the program's own modules (the script, modules
    from its own files), done now: for a death by signal, where no teardown follows.

    Garbage still holding one of them goes first (torch's import leaves copies of
    ``sys.modules`` in reference cycles), so that leaving ``sys.modules`` ends each module
    and its globals go by reference count, in python's order: collected together with
    that garbage, a file's text layer and its buffer could be finalised in either order
    and the text lost. A second collection takes their reference cycles."""
    gc.unfreeze()
    gc.collect()
    for name in [name for name, module in list(sys.modules.items()) if _programs(module)]:
        sys.modules.pop(name, None)
    gc.collect()


def _programs(module: object) -> bool:
    """A module of the program's own: its file is not a library's (``is_user_file``)."""
    from torchleak.system.userfiles import is_user_file

    path = getattr(module, "__file__", None)
    return isinstance(module, types.ModuleType) and isinstance(path, str) and is_user_file(path)


def _collect_then_freeze() -> None:
    gc.collect()
    gc.freeze()


def run_target(target: Target) -> Outcome:
    """Run it; return how it ended."""
    saved_argv, saved_path0 = sys.argv[:], sys.path[0] if sys.path else None
    try:
        if target.script is not None:
            script = os.path.abspath(target.script)
            sys.argv = [str(target.script), *target.args]
            base = script if os.path.isdir(script) else os.path.dirname(script)
            _set_path0(base)
            if os.path.isfile(script):
                _run_file(script)
            else:  # a folder with __main__.py, or a zip: runpy knows those
                runpy.run_path(script, run_name="__main__")
        else:
            sys.argv = [target.module or "", *target.args]
            _set_path0(os.getcwd())
            _run_module(target.module or "")
        return Outcome(0, False)
    except SystemExit as exc:
        return Outcome(_exit_code(exc.code), False)
    except KeyboardInterrupt as exc:
        _print_exception(exc)
        return Outcome(130, True, _sigint())
    except BaseException as exc:  # noqa: BLE001 - the user's exception, reported like Python
        _print_exception(exc)
        return Outcome(1, True)
    finally:
        sys.argv = saved_argv
        if saved_path0 is not None and sys.path:
            sys.path[0] = saved_path0


def _sigint() -> int | None:
    """Python dies by SIGINT on any uncaught KeyboardInterrupt (its ``exit_sigint``):
    whatever handler the script installed, and when SIGINT was ignored from the start (a
    job sent to the background by a shell)."""
    import signal

    return int(signal.SIGINT) if hasattr(signal, "pthread_kill") else None


def _run_file(script: str) -> None:
    """Exec a script as ``python script.py`` does: a fresh ``__main__`` whose ``__file__`` is
    absolute while ``sys.argv[0]`` stays as typed (runpy.run_path would overwrite it).

    It stays ``__main__`` after it ends, as under python: the program's ``atexit``
    handlers read it there, and its globals live until the interpreter's teardown (a
    file the script never closed is still open when those handlers run)."""
    with open(script, "rb") as handle:
        code = compile(handle.read(), script, "exec", dont_inherit=True)
    main = types.ModuleType("__main__")
    main.__dict__.update(__file__=script, __builtins__=builtins, __cached__=None,
                         __loader__=importlib.machinery.SourceFileLoader("__main__", script))
    sys.modules["__main__"] = main
    exec(code, main.__dict__)


def _run_module(name: str) -> None:
    """Run a module as ``python -m`` does: found as runpy finds it (a package's
    ``__main__`` included), executed as a fresh ``__main__`` that, like a script's, stays
    there after it ends (``runpy.run_module`` puts the previous ``__main__`` back: the
    program's ``atexit`` handlers then saw ours)."""
    # runpy's own finder, the one ``python -m`` uses: ImportError's message is python's.
    name, spec, code = runpy._get_module_details(name)  # type: ignore[attr-defined]
    main = types.ModuleType("__main__")
    main.__dict__.update(__file__=spec.origin, __cached__=spec.cached, __doc__=None,
                         __loader__=spec.loader, __package__=spec.parent, __spec__=spec,
                         __builtins__=builtins)
    if spec.origin and spec.has_location:
        sys.argv[0] = spec.origin
    sys.modules["__main__"] = main
    exec(code, main.__dict__)


def _set_path0(folder: str) -> None:
    if sys.path:
        sys.path[0] = folder
    else:
        sys.path.append(folder)


def _exit_code(code: object) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF if code >= 0 else code % 256
    print(code, file=sys.stderr)
    return 1


def _user_traceback(tb: TracebackType | None) -> TracebackType | None:
    # "<frozen runpy>" (3.11+) is matched as is: abspath would prefix it with the cwd.
    while tb is not None and (tb.tb_frame.f_code.co_filename in _OUR_FILES or os.path.abspath(
            tb.tb_frame.f_code.co_filename).startswith(_OUR_FILES)):
        tb = tb.tb_next
    return tb


def _without_our_frames(tb: TracebackType | None) -> TracebackType | None:
    """The traceback python would print: a frame of ours that the error only passed
    through (the export tracer's wrapper) is not there under python. One the error was
    raised in (no frame of another's after it) stays."""
    frames = []
    while tb is not None:
        frames.append(tb)
        tb = tb.tb_next
    ours = [os.path.abspath(f.tb_frame.f_code.co_filename).startswith(_PACKAGE)
            for f in frames]
    last_other = max((i for i, mine in enumerate(ours) if not mine), default=-1)
    kept = [f for i, f in enumerate(frames) if not ours[i] or i > last_other]
    for frame, after in zip(kept, kept[1:]):
        frame.tb_next = after
    if kept:
        kept[-1].tb_next = None
    return kept[0] if kept else None


def _print_exception(exc: BaseException) -> None:
    tb = _without_our_frames(_user_traceback(exc.__traceback__))
    try:
        # The default hook prints exc.__traceback__ when set, ignoring ``tb``: cut it there.
        sys.excepthook(type(exc), exc.with_traceback(tb), tb)
    except Exception:  # noqa: BLE001 - a broken user excepthook: print like Python does
        traceback.print_exception(type(exc), exc, tb)
