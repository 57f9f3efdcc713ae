"""Find what holds memory, by name, from roots a user recognises.

At a step boundary we walk, breadth first and within a fixed object budget, from:
the ``self`` and locals of the user's frames on the stack (the training loop that called
``optimizer.step()``), the globals of the user's modules, pyplot's figure registry and
torch's global hooks. Every container, named tensor, module hook table, lru_cache and
DataLoader met on the way becomes a ``HolderSample`` keyed by its path
(``Trainer.train_outputs``, ``main().running_loss``, ``news._ACTIVATIONS``). The
analysis compares the same paths across steps; a path is stable even when a list is
replaced, so a list rebuilt every epoch reads as healthy. ``walk.Walk`` is one walk.

We never keep references to what we measure between walks: holding a user's list
would itself be a leak. Suspects are found again by their route (``holder_sample``).
"""

from __future__ import annotations

import gc
import os
from types import FrameType, GeneratorType
from typing import Any

from torchleak.record.probes.holder_sample import HolderSample, Route, resolve
from torchleak.record.probes.usercode import user_frames, user_modules
from torchleak.record.probes.walk import _SKIP, GRAPH_CAP, Walk, count_graph_nodes

__all__ = ["GRAPH_CAP", "HolderSample", "HolderWalker", "count_graph_nodes"]


class HolderWalker:
    def __init__(self, max_objects: int = 8_000, graph_cap: int = GRAPH_CAP,
                 max_samples: int = 400) -> None:
        self.max_objects = max_objects
        self.graph_cap = graph_cap
        self.max_samples = max_samples
        self._capped_graphs: set[str] = set()
        self.last_nodes: dict[str, int] = {}  # path -> autograd nodes at its last count
        self.routes: dict[str, Route] = {}
        self.labels: dict[str, str] = {}

    def walk(self, frame: FrameType | None) -> list[HolderSample]:
        walk = Walk(self)
        for path, obj, label, route in self._roots(frame):
            walk.enqueue(obj, path, 0, label, route)
        walk.run()
        walk.extra_registries()
        self.routes.update(walk.sample_routes)
        self.labels.update({p: walk.labels[p] for p in walk.sample_routes if p in walk.labels})
        return walk.samples

    def remeasure(self, frame: FrameType | None, paths: list[str]) -> list[HolderSample]:
        """Measure again only ``paths`` (suspects from earlier walks), found by their routes:
        ~10-50 µs each instead of a whole walk."""
        walk = Walk(self)
        walk.labels = dict(self.labels)
        frames = user_frames(frame)
        for path in paths:
            route = self.routes.get(path)
            if route is None:
                continue
            try:
                obj = resolve(route, frames)
            except (KeyError, IndexError, AttributeError, TypeError, ValueError, StopIteration):
                continue
            walk.measure(obj, path, route)
        return walk.samples

    def _roots(self, frame: FrameType | None) -> list[tuple[str, Any, str | None, Route]]:
        """(path, object, label, route) for every root, innermost user frame first."""
        roots: list[tuple[str, Any, str | None, Route]] = []
        for f in user_frames(frame):
            name = f.f_code.co_name
            if name == "<module>":
                continue  # module frames are covered by the module globals below
            local_vars = f.f_locals
            owner = local_vars.get("self")
            if owner is not None and not isinstance(owner, _SKIP):
                roots.append((type(owner).__name__, owner, None, (("local", name, "self"),)))
            for var, value in local_vars.items():
                if var != "self":
                    roots.append((f"{name}().{var}", value, f"local {var} in {name}()",
                                  (("local", name, var),)))
            for i, gen in enumerate(o for o in gc.get_referents(f) if isinstance(o, GeneratorType)):
                # `for x in gen():` keeps the generator on the frame's stack, not in a local.
                roots.append((f"{name}().<iterator{i}>", gen, None, None))
        for display, module in user_modules():
            filename = os.path.basename(getattr(module, "__file__", "") or display)
            for var, value in list(vars(module).items()):
                if not var.startswith("__"):
                    roots.append((f"{display}.{var}", value, f"global {var} in {filename}",
                                  (("global", module.__name__, var),)))
        return roots


