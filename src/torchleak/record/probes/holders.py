"""Find what holds memory, by name, from roots a user recognises.

At a step boundary we walk, breadth first and within a fixed object budget, from: the
``self`` and locals of the user's frames on the training thread's stack, the user frames
of every other thread (a metrics flusher's pending list), the globals of the user's
modules, and the registries where user objects end up unnamed (``registries``). Every
container, buffer, named tensor, module hook table, lru_cache and DataLoader met on the
way becomes a ``HolderSample`` keyed by its path (``Trainer.train_outputs``,
``main().running_loss``, ``news._ACTIVATIONS``). The analysis compares the same paths
across steps; a path is stable even when a list is replaced, so a list rebuilt every
epoch reads as healthy. ``walk.Walk`` is one walk.

We never keep references to what we measure between walks: holding a user's list would
itself be a leak. Suspects are found again by their route (``holder_sample.Resolver``).
What the walker remembers between walks (routes, labels, graph sizes) is bounded.
"""

from __future__ import annotations

import gc
import os
import threading
from types import FrameType, GeneratorType
from typing import Any

import torch

from torchleak.record.probes import access
from torchleak.record.probes.holder_sample import HolderSample, Resolver, Route
from torchleak.record.probes.interpreter import interpreter_samples, torch_switches
from torchleak.record.probes.registries import registry_samples
from torchleak.record.probes.usercode import owner_frames, user_frames, user_modules
from torchleak.record.probes.walk import GRAPH_CAP, Walk, WalkMemory, user_class

__all__ = ["GRAPH_CAP", "HolderSample", "HolderWalker"]

_OUR_THREADS = "torchleak-"

Root = tuple[str, Any, "str | None", "Route | None"]


class HolderWalker(WalkMemory):
    def walk(self, frame: FrameType | None) -> list[HolderSample]:
        walk = Walk(self)
        with torch._C.DisableTorchFunctionSubclass():
            for path, obj, label, route in self._roots(frame):
                walk.enqueue(obj, path, 0, label, route)
            walk.run()
            for sample in registry_samples():
                walk.record(sample)
            for sample in interpreter_samples():
                walk.record(sample)
            for sample in torch_switches():
                walk.record(sample)
        for sample in walk.samples:
            if sample.length:
                self.recorded.remember(sample.holder, True)
        for path, route in walk.sample_routes.items():
            self.routes.remember(path, route)
            if path in walk.labels:
                self.labels.remember(path, walk.labels[path])
        self.native = walk.native[:20]
        return walk.samples

    def remeasure(self, frame: FrameType | None, paths: list[str]) -> list[HolderSample]:
        """Measure again only ``paths`` (suspects from earlier walks), found by their routes:
        ~10-50 us each instead of a whole walk."""
        walk = Walk(self)
        walk.labels = {p: self.labels[p] for p in paths if p in self.labels}
        resolver = Resolver(user_frames(frame) + owner_frames(frame, user_class),
                            access.current_frames)
        try:
            with torch._C.DisableTorchFunctionSubclass():
                for path in paths:
                    route = self.routes.get(path)
                    if route is None:
                        continue
                    try:
                        obj = resolver.resolve(route)
                    except (KeyError, IndexError, AttributeError, TypeError, ValueError,
                            StopIteration):
                        continue
                    try:
                        walk.measure(obj, path)
                    except Exception:  # noqa: BLE001 - an odd object: skip it this time
                        continue
                    del obj
        finally:
            resolver.release()
        return walk.samples

    def _roots(self, frame: FrameType | None) -> list[Root]:
        """(path, object, label, route) for every root, innermost user frame first."""
        roots: list[Root] = []
        for f in user_frames(frame):
            roots.extend(_frame_roots(f))
        for f in owner_frames(frame, user_class):
            roots.extend(_frame_roots(f, owner_only=True))
        roots.extend(_thread_roots())
        for display, module in user_modules():
            filename = os.path.basename(getattr(module, "__file__", "") or display)
            for var, value in list(vars(module).items()):
                if not var.startswith("__"):
                    roots.append((f"{display}.{var}", value, f"global {var} in {filename}",
                                  (("global", module.__name__, var),)))
        return roots


def _frame_roots(f: FrameType, thread: tuple[int, str] | None = None,
                 owner_only: bool = False) -> list[Root]:
    """A frame's ``self`` and locals (``owner_only``: its ``self`` alone, for a library
    frame running a method of the user's own object)."""
    name = f.f_code.co_name
    if name == "<module>":
        return []  # module frames are covered by the module globals
    roots: list[Root] = []
    local_vars = access.frame_locals(f)
    where = f"thread {thread[1]} in {name}()" if thread else f"{name}()"
    prefix = f"thread:{thread[1]}.{name}()" if thread else f"{name}()"

    def route(var: str) -> Route:
        return (("thread", thread[0], name, var),) if thread else (("local", name, var),)

    owner = local_vars.get("self")
    if owner is not None and not access.is_a(owner, (type,)):
        path = type(owner).__name__ if thread is None else f"{prefix}.self"
        roots.append((path, owner, None, route("self")))
    if owner_only:
        return roots
    for var, value in local_vars.items():
        if var != "self":
            roots.append((f"{prefix}.{var}", value, f"local {var} in {where}"
                          if thread is None else f"{where}: local {var}", route(var)))
    for i, gen in enumerate(o for o in gc.get_referents(f) if type(o) is GeneratorType):
        # `for x in gen():` keeps the generator on the frame's stack, not in a local.
        roots.append((f"{prefix}.<iterator{i}>", gen, None, None))
    return roots


def _thread_roots() -> list[Root]:
    """The user frames of every other thread: what a background thread keeps."""
    me = threading.get_ident()
    names = {ident: str(access.attribute(t, "_name") or ident)
             for ident, t in list(getattr(threading, "_active", {}).items())}
    roots: list[Root] = []
    frames = access.current_frames()
    # This thread's own frame must never sit in a local here: frame -> local -> frame is a
    # cycle that only the cyclic collector frees, and it would pin every root until then.
    frames.pop(me, None)
    try:
        for ident in list(frames):
            name = names.get(ident, str(ident))
            if not name.startswith(_OUR_THREADS):
                for f in user_frames(frames[ident]):
                    roots.extend(_frame_roots(f, (ident, name)))
    finally:
        frames.clear()
    return roots
