"""What one training step is, and how its boundary is found with no code changes.

A *step* is one cycle of optimizer updates. With one optimizer it is one
``optimizer.step()`` call (gradient accumulation therefore counts one step per real
update, not per micro-batch). With several optimizers stepping in turn (a GAN's D and G) the cycle is learned from the first calls: the boundary is after the
optimizer that closes the cycle, so a D/G loop counts one step per D+G pair. An
optimizer that only steps occasionally never becomes the boundary. If the boundary
optimizer stops stepping while another keeps stepping (a new optimizer for a second
training stage), the other one takes over. An optimizer created anew (``opt =
Adam(model.parameters())`` after the model grew) replaces the boundary optimizer it
follows at its first ``step()`` once the old one is gone (garbage), so no step is lost.
A ``step()`` inside ``torch.compile``d code counts the same, at run time, through the call
the hook puts into the compiled code (``compiled_steps``).

Loops without a ``torch.optim`` optimizer (evaluation, inference, RL rollouts) need no
code change: while no optimizer step has been seen, a step is one forward call of the
outermost module (a module called while no other module's forward runs on that thread),
learned like optimizer cycles (a policy and a value network called in turn make one
step). The first ``LEARNING_CALLS`` (8) such calls never close a step (a training loop's
forwards before its first optimizer step: accumulated micro-batches, a GAN's passes), and
the hooks go away at the first optimizer step, so a training loop pays for them only
until then; a loop with no optimizer only until its step is known (``ForwardSteps``).
With neither, a sample every ``TimeSteps.INTERVAL`` seconds is the step, once the
program has run ``TimeSteps.IDLE`` seconds with torch and no other step.
``torchleak.watch().step()`` is the explicit choice; once it is used, nothing else counts.
"""

from __future__ import annotations

import builtins
import sys
import threading
import weakref
from collections.abc import Callable
from types import FrameType, FunctionType
from typing import Any, Protocol

from torchleak.record import compiled_steps
from torchleak.record.export_lift import ExportLift, HandOverOnLoad
from torchleak.record.outbox import Outbox
from torchleak.record.probes.access import current_frames


class BoundaryTarget(Protocol):
    """What the step sources need of the recorder they drive."""

    @property
    def step(self) -> int: ...

    @property
    def in_child(self) -> bool: ...

    @property
    def clock(self) -> StepClock: ...

    @property
    def out(self) -> Outbox: ...

    def boundary(self, frame: FrameType | None) -> None: ...


class StepClock:
    """Turns optimizer ``step()`` calls into step boundaries."""

    def __init__(self) -> None:
        self._closer: int | None = None  # id() of the optimizer that closes a cycle
        self._closer_ref: weakref.ref[Any] | None = None  # the closer, while it lives
        self._learning = True  # still inside the first cycle
        self._first_cycle: set[int] = set()
        self._since_boundary: dict[int, int] = {}
        self.manual = False
        # id() of the closer while its next step() closes a step and changes nothing
        # here (cycle learned, no other optimizer stepped since): the boundary compares
        # this and skips ``observe``. -1 otherwise.
        self.steady = -1

    def observe(self, optimizer_id: int, optimizer: Any = None) -> bool:
        """Record one optimizer.step() (``optimizer``: the object, to tell when the one
        closing cycles is gone); True when it closes a training step."""
        closes = self._observe(optimizer_id, optimizer)
        closer = self._closer
        self.steady = closer if (closer is not None and not self.manual
                                 and not self._learning and not self._since_boundary) else -1
        return closes

    def _observe(self, optimizer_id: int, optimizer: Any) -> bool:
        if self.manual:
            return False
        if self._closer is None:
            self._set_closer(optimizer_id, optimizer)
            self._first_cycle.add(optimizer_id)
            return True
        if optimizer_id != self._closer and self._closer_gone():
            # A new optimizer in place of the closer, freed when its name was rebound.
            self._first_cycle.discard(self._closer)
            self._first_cycle.add(optimizer_id)
            self._set_closer(optimizer_id, optimizer)
            self._since_boundary.clear()
            return True
        if self._learning:
            if optimizer_id in self._first_cycle:
                self._learning = False  # the cycle repeats: its last newcomer closes it
            else:
                self._first_cycle.add(optimizer_id)
                self._set_closer(optimizer_id, optimizer)
                return False
        if optimizer_id == self._closer:
            if self._since_boundary:
                self._since_boundary.clear()
            return True
        calls = self._since_boundary.get(optimizer_id, 0) + 1
        self._since_boundary[optimizer_id] = calls
        if calls >= 2:
            # The closer went quiet while this one keeps stepping: it takes over.
            self._set_closer(optimizer_id, optimizer)
            self._since_boundary.clear()
            return True
        return False

    def _set_closer(self, key: int, optimizer: Any) -> None:
        self._closer = key
        try:
            self._closer_ref = None if optimizer is None else weakref.ref(optimizer)
        except TypeError:  # an object with no weak references: never known to be gone
            self._closer_ref = None

    def _closer_gone(self) -> bool:
        return self._closer_ref is not None and self._closer_ref() is None

    def manual_step(self) -> bool:
        self.manual = True
        self.steady = -1
        return True

    @property
    def learned(self) -> bool:
        """The cycle is known: its first member was seen again."""
        return self._closer is not None and not self._learning


Boundary = Callable[[FrameType | None], None]
# torch's tables of global module hooks (``_has_any_global_hook`` reads these).
GLOBAL_HOOK_TABLES = ("_global_backward_pre_hooks", "_global_backward_hooks",
                      "_global_forward_pre_hooks", "_global_forward_hooks",
                      "_global_forward_hooks_always_called",
                      "_global_forward_hooks_with_kwargs")
# Outermost forward calls that never close a step: a training loop's forwards before its
# first optimizer step (a GAN's D and G passes, accumulated micro-batches) are not steps.
LEARNING_CALLS = 8
# After this many outermost calls with the cycle learned, the global hooks give way to a
# wrapper of the outermost modules' classes' ``__call__`` (``ForwardSteps._narrow``): a
# loop with no optimizer otherwise pays torch's slow call path at every module call for
# the whole run. With more outermost classes than NARROW_CLASSES the hooks stay.
NARROW_CALLS = 16
NARROW_CLASSES = 4
_ABSENT = object()  # a class with no ``__call__`` of its own
# id(ForwardSteps) -> a weak reference to it: how a class's ``__call__`` of ours finds it.
_NARROWED: dict[int, weakref.ref[ForwardSteps]] = {}
# Where ``torch.compile``'s module wrapper is defined: its class gets our ``__call__``
# too (a compiled module's calls are its wrapper's eager calls), now or when it loads.
EVAL_FRAME = "torch._dynamo.eval_frame"


class ForwardSteps:
    """Step boundaries from the outermost module's forward calls (see the module doc).

    Two global hooks (before and after every module's forward) keep a per-thread depth:
    a forward that returns to depth 0 was the outermost. Any global hook sends every
    module call through torch's slower call path: ~3-7 us more per module call in all
    (``benchmarks/forward_steps.py``, BENCHMARKS.md). A training loop pays it until its
    first optimizer step. A loop with no optimizer pays it only until its step is known
    (``NARROW_CALLS``): then the hooks give way to a ``__call__`` on the classes of the
    outermost modules (~1 us per outermost call; every instance of those classes, one
    rebuilt each step included; nothing on the instances, so pickling and copying a
    module are as under python); ``torch.compile``'s module wrapper class gets it too, so
    a module compiled later is counted as the hooks counted it. Inside ``torch.compile``
    hooks and wrapper step aside at once (no graph break); code compiled while the hooks
    were on keeps them (no narrowing then).
    """

    def __init__(self, on_boundary: Boundary) -> None:
        self._on_boundary = on_boundary
        self._clock = StepClock()
        self._handles: list[Any] = []
        self._hook_check: tuple[Any, Any, Any] | None = None  # module, torch's, ours
        self._graphs_before = 0  # dynamo's graphs when ours were installed
        self._thread: int | None = None
        self.calls = 0  # outermost forward calls seen
        self.steps = 0  # boundaries made
        self.inert = False  # steps come from elsewhere now; the hooks return at once
        self._export = ExportLift(lambda: self._handles)  # torch.export never sees them
        self._local = threading.local()  # the depth of module calls on each thread
        # The classes of the outermost modules (weakly: a class keeps its module alive).
        self._outer_classes: dict[int, weakref.ref[type]] = {}
        self._stay_wide = False  # the global hooks stay (too many classes, compiled code)
        self._patched: list[tuple[type, Any, Any]] = []  # (class, its own __call__, ours)
        self._dynamo_finder: HandOverOnLoad | None = None  # patches OptimizedModule
        self.narrowed = False

    def install(self) -> None:
        import torch
        from torch.nn.modules.module import (register_module_forward_hook,
                                             register_module_forward_pre_hook)

        is_compiling = torch.compiler.is_compiling
        local = self._local
        outermost = self._outermost
        steps = self

        def before(module: Any, args: Any) -> None:
            if is_compiling() or steps.inert:  # the compiler reads only the first
                return
            depth = getattr(local, "depth", 0)
            if depth and module is getattr(local, "outer", None):
                depth = 0  # the outermost called again: its last call raised, no `after`
            if depth == 0:
                local.outer = module
            local.depth = depth + 1

        def after(module: Any, args: Any, output: Any) -> None:
            if is_compiling() or steps.inert:  # the compiler reads only the first
                return
            depth = getattr(local, "depth", 1) - 1
            local.depth = depth
            if depth == 0:
                local.outer = None
                outermost(module)

        # No always_call: it costs ~2 us more per module call; a raising forward is
        # recovered from in `before`.
        self._handles = [register_module_forward_pre_hook(before),
                         register_module_forward_hook(after)]
        self._export.install()
        self._hide_from_compile_warning()
        self._graphs_before = compiled_steps.unique_graphs()

    def remove(self, final: bool = False) -> None:
        """For good: an optimizer step or ``watch().step()`` defines the steps now. When
        ``torch.compile`` has compiled code already, its guards saw our hooks: removing
        them would recompile it, so they stay, inert (``final``: the run is over)."""
        self.inert = True
        if not final and self._graphs_seen_ours():
            return
        self._remove_global()
        self._drop_dynamo_finder()
        self._unpatch()
        self._export.uninstall()
        self._show_to_compile_warning()

    def _graphs_seen_ours(self) -> int:
        """Compiled graphs made while our hooks were installed (their guards saw them),
        less those of exports (traced without them)."""
        return compiled_steps.unique_graphs() - self._graphs_before - self._export.graphs_made

    def _remove_global(self) -> None:
        handles, self._handles = self._handles, []
        for handle in handles:
            handle.remove()

    def _narrow(self) -> None:
        """Global hooks out, a ``__call__`` on each outermost class in (see the class doc).
        Called at an outermost call's end, inside torch's hook loop (it iterates a copy)."""
        if self.narrowed:
            return
        classes = [ref() for ref in self._outer_classes.values()]
        if any(cls is None or not self._patchable(cls) for cls in classes):
            self._stay_wide = True
            return
        _NARROWED[id(self)] = weakref.ref(self)  # weakly: see ``counting_call``
        try:
            for cls in classes:
                self._patch(cls)  # type: ignore[arg-type]
        except (TypeError, AttributeError):  # a class that refuses new attributes
            self._unpatch()
            self._stay_wide = True
            return
        self._remove_global()
        self._show_to_compile_warning()
        self.narrowed = True
        loaded = sys.modules.get(EVAL_FRAME)
        if loaded is not None:
            self._compiler_loaded(loaded)
        else:
            self._dynamo_finder = HandOverOnLoad(EVAL_FRAME, self._compiler_loaded)
            sys.meta_path.insert(0, self._dynamo_finder)

    def _compiler_loaded(self, module: Any) -> None:
        """``torch.compile``'s module wrapper counts like the modules it wraps did under
        the hooks: its class gets our ``__call__``."""
        self._drop_dynamo_finder()
        wrapper = getattr(module, "OptimizedModule", None)
        if not self.narrowed or self.inert or not isinstance(wrapper, type) or \
                not self._patchable(wrapper):
            return
        try:
            self._patch(wrapper)
        except (TypeError, AttributeError):
            pass

    def _drop_dynamo_finder(self) -> None:
        finder, self._dynamo_finder = self._dynamo_finder, None
        if finder is not None and finder in sys.meta_path:
            sys.meta_path.remove(finder)

    @staticmethod
    def _patchable(cls: type) -> bool:
        own = cls.__dict__.get("__call__", _ABSENT)
        return own is _ABSENT or type(own) is FunctionType

    def _patch(self, cls: type) -> None:
        import torch

        found = cls.__dict__.get("__call__", _ABSENT)
        own = None if found is _ABSENT else found
        ours_call = counting_call(cls, own, torch.compiler.is_compiling, id(self))
        cls.__call__ = ours_call  # type: ignore[method-assign, operator]
        self._patched.append((cls, found, ours_call))

    def _unpatch(self) -> None:
        """Each class's own ``__call__`` back, unless someone replaced ours since."""
        _NARROWED.pop(id(self), None)
        patched, self._patched = self._patched, []
        for cls, own, ours in reversed(patched):
            if cls.__dict__.get("__call__") is not ours:
                continue
            if own is _ABSENT:
                delattr(cls, "__call__")
            else:
                cls.__call__ = own  # type: ignore[method-assign]

    def _hide_from_compile_warning(self) -> None:
        """A ``torch.compile``d module warns on every call while any global module hook
        exists, as ``torch.nn.modules.module._has_any_global_hook`` says (read by nothing
        else in torch). While ours are installed it answers as if they were not: the
        program gets that warning exactly when its own hooks would give it (a warnings
        filter of ours was undone by the program's own, and ``-W error`` made a crash)."""
        module = sys.modules.get("torch.nn.modules.module")
        original = getattr(module, "_has_any_global_hook", None)
        if original is None:
            return
        ours = {(id(handle.hooks_dict_ref()), handle.id) for handle in self._handles}

        def _has_any_global_hook() -> bool:
            for name in GLOBAL_HOOK_TABLES:
                table = getattr(module, name, None) or {}
                if any((id(table), key) not in ours for key in table):
                    return True
            return False

        module._has_any_global_hook = _has_any_global_hook  # type: ignore[union-attr]
        self._hook_check = (module, original, _has_any_global_hook)

    def _show_to_compile_warning(self) -> None:
        if self._hook_check is None:
            return
        module, original, ours = self._hook_check
        self._hook_check = None
        if getattr(module, "_has_any_global_hook", None) is ours:
            module._has_any_global_hook = original

    @property
    def installed(self) -> bool:
        return bool(self._handles) and not self.inert

    def _outermost(self, module: Any) -> None:
        ident = threading.get_ident()
        if self._thread is None:
            self._thread = ident  # the loop's thread; other threads' calls do not count
        elif ident != self._thread:
            return
        self.calls += 1
        # Keyed by class: a module rebuilt every iteration is still the same step.
        if self._clock.observe(id(type(module))) and self.calls > LEARNING_CALLS:
            self.steps += 1
            self._on_boundary(sys._getframe(2))
        if not self.narrowed and not self._stay_wide and not self.inert:
            self._note_outer(type(module))

    def _note_outer(self, kind: type) -> None:
        """An outermost call's class while the global hooks are on; narrow once the step
        is known."""
        if id(kind) not in self._outer_classes:
            if len(self._outer_classes) >= NARROW_CLASSES:
                self._stay_wide = True
                return
            self._outer_classes[id(kind)] = weakref.ref(kind)
        if self.calls < NARROW_CALLS or not self._clock.learned:
            return
        # Code compiled while the hooks were on has them in its guards: they stay.
        if self._graphs_seen_ours():
            self._stay_wide = True
            return
        self._narrow()


def counting_call(cls: type, own: Any, is_compiling: Callable[[], bool],
                  key: int) -> Callable[..., Any]:
    """The ``__call__`` ``ForwardSteps`` sets on an outermost module class: it counts a
    call that returns to depth 0 as an outermost forward, and otherwise calls through to
    the class's own ``__call__`` (``own``), else its parent's.

    What it holds must survive being pickled by value with no torchleak where it is
    unpickled: cloudpickle (Ray, joblib) copies a class defined in ``__main__`` with
    everything in its ``__dict__``. So it holds the class, its own ``__call__`` or None,
    torch's ``is_compiling`` and an int, has ``sys`` and the builtins for globals, and
    finds the recorder through ``sys.modules`` (a copy elsewhere finds none and calls
    through). ``torch.compile(module)`` keeps the ``__call__`` it found: a module compiled
    during the run calls this one after it too, inert, keeping nothing of ours alive."""

    def __call__(module: Any, *args: Any, **kwargs: Any) -> Any:
        call = super(cls, module).__call__ if own is None else own.__get__(module, cls)
        if is_compiling():  # first: compiled code never reads (or guards on) our state
            return call(*args, **kwargs)
        ours = sys.modules.get("torchleak.record.steps")
        ref = None if ours is None else ours._NARROWED.get(key)
        steps = None if ref is None else ref()
        if steps is None or steps.inert:
            return call(*args, **kwargs)
        local = steps._local
        depth = getattr(local, "depth", 0)
        local.depth = depth + 1
        try:
            result = call(*args, **kwargs)
        finally:
            local.depth = depth
        if depth == 0:  # a forward that raised closes no step, as with the hooks
            steps._outermost(module)
        return result

    made = FunctionType(__call__.__code__, {"sys": sys, "__builtins__": builtins},
                        "__call__", None, __call__.__closure__)
    made.__qualname__ = f"{cls.__qualname__}.__call__"
    made.__module__ = cls.__module__
    return made


class TimeSteps:
    """The last resort: neither an optimizer step nor a module forward in ``IDLE`` seconds
    of a program that uses torch; then a sample every ``INTERVAL`` seconds is a step,
    taken on this thread with the loop thread's frame, until any other step is seen."""

    IDLE = 30.0
    INTERVAL = 2.0

    def __init__(self, on_sample: Callable[[FrameType | None], None],
                 other_steps: Callable[[], bool], loop_thread: int) -> None:
        self._on_sample = on_sample
        self._other_steps = other_steps
        self._loop_thread = loop_thread
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="torchleak-time-steps",
                                        daemon=True)
        self.samples = 0

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def _run(self) -> None:
        if self._stop.wait(self.IDLE) or self._other_steps():
            return
        while not self._stop.wait(self.INTERVAL if self.samples else 0):
            if self._other_steps():
                return
            frame = current_frames().get(self._loop_thread)
            try:
                self._on_sample(frame)
            finally:
                del frame
            self.samples += 1


STEP_DEFINITIONS = {
    "optimizer": "one optimizer step cycle (docs/detection.md)",
    "manual": "one torchleak.watch().step() call",
    "forward": "one forward call of the outermost module (no optimizer step seen; "
               "docs/detection.md)",
    "time": f"one sample every {TimeSteps.INTERVAL:g} s (no optimizer step or module "
            "forward seen; docs/detection.md)",
}


class StepSources:
    """Which kind of boundary makes the recorder's steps. Optimizer steps and ``watch()``
    win for good (the forward hooks and the time sampler go away); forward calls count
    only while neither was seen; time samples only while nothing else was."""

    def __init__(self, recorder: BoundaryTarget) -> None:
        self._recorder = recorder
        self.current: str | None = None
        self._forward: ForwardSteps | None = None
        self._time: TimeSteps | None = None
        self._compiled_seen = False  # compiled steps counted: said in an event
        self._dropped_said = False  # compiled steps traced, none counted: said in an event

    def attach(self) -> None:
        """Called once torch is imported, on the thread that will run the loop."""
        self._forward = ForwardSteps(self._forward_boundary)
        self._forward.install()
        self._time = TimeSteps(self._time_sample, lambda: self.current not in (None, "time"),
                               threading.get_ident())
        self._time.start()
        compiled_steps.listen(self._compiled_step)

    def detach(self) -> None:
        compiled_steps.unlisten(self._compiled_step)
        if self._forward is not None:
            self._forward.remove(final=True)
        if self._time is not None:
            self._time.stop()

    def switch(self, source: str) -> None:
        """The first step of a kind."""
        previous, self.current = self.current, source
        if source in ("optimizer", "manual") and self._forward is not None:
            self._forward.remove()
        if source != "time" and self._time is not None:
            self._time.stop()
        recorder = self._recorder
        recorder.out.set_meta("step_definition", STEP_DEFINITIONS[source])
        if previous is not None:
            recorder.out.event("step_source", source, f"steps counted by {source} from step "
                           f"{recorder.step + 1} (before: {previous})")

    def _compiled_step(self, key: int, frame: FrameType | None) -> None:
        """An optimizer step made inside compiled code (``compiled_steps``): ``key`` is
        the optimizer's id, fixed when the code was traced."""
        recorder = self._recorder
        if recorder.in_child:
            return
        try:
            closes = recorder.clock.observe(key)
            if not self._compiled_seen:
                self._compiled_seen = True
                recorder.out.event("step_source", "optimizer", "optimizer steps inside "
                               "torch.compile are counted at run time by torchleak's step "
                               f"operator ({compiled_steps.OP_NAME}) in the compiled code")
            if closes and self.current != "optimizer":
                self.switch("optimizer")
        except Exception:  # noqa: BLE001 - never raise into training (inside compiled code)
            return
        if closes:
            recorder.boundary(frame)

    def _forward_boundary(self, frame: FrameType | None) -> None:
        if self.current in ("optimizer", "manual") or self._recorder.in_child:
            return
        if self.current != "forward":
            self.switch("forward")
        self._recorder.boundary(frame)

    def _time_sample(self, frame: FrameType | None) -> None:
        """A time-based step, on the sampler's thread with the loop thread's frame."""
        if self.current not in (None, "time") or self._recorder.in_child:
            return
        if self.current is None:
            self.switch("time")
        if not self._dropped_said and compiled_steps.traced and not compiled_steps.counted:
            self._dropped_said = True  # the compiler may trace the step after sampling began
            self._recorder.out.event("step_source", "time", "optimizer steps run inside "
                                 "torch.compile and the compiled code never made torchleak's "
                                 "step call: steps are time samples")
        try:
            self._recorder.boundary(frame)
        except BaseException:  # noqa: BLE001 - a guard stop needs the loop's own thread
            self._recorder.out.event("guard", "time_steps", "not stopped: a run with no step "
                                 "boundaries cannot be ended cleanly (add "
                                 "torchleak.watch().step() to the loop)")
