"""``torch.export`` traced as if torchleak were not there.

While no optimizer step has been seen, torchleak keeps two global module hooks
(``steps.ForwardSteps``). A strict ``torch.export.export`` fails while any global module
hook exists ("Attempted to inline function marked as skipped: ModuleToTrace.forward", the
same with a hook of the program's own), so an export script, or a training script that
exports before its first step, would fail only when recorded. Every export goes through
``torch.export._trace._export``, looked up at each call (``export``, ``draft_export``, the
older ``torch._export`` entry points), so that is what is wrapped: an ``export`` the program
imported before recording began is covered too. The wrapper lifts our two hooks out of
torch's hook tables for the call and puts them back after, under the same keys in the same
order (a compiled module's guards see the tables as they were: no recompile). The
program's own hooks stay. An export is no step.

``torch.export._trace`` takes a second to import, so it is never imported for this: when
it is not loaded yet, a finder on ``sys.meta_path`` wraps it as it loads. A module that
took its own name for the tracer when it loaded (``torch.export._draft_export``) has that
name swapped too, both ways. The wrapper reaches the lift through a weak reference: one
left somewhere after the recording calls torch's tracer, and keeps nothing of ours alive.
The graphs dynamo makes inside an export are counted (``graphs_made``): they are no
compiled code whose guards saw our hooks.
"""

from __future__ import annotations

import functools
import importlib.abc
import importlib.machinery
import sys
import weakref
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from types import ModuleType
from typing import Any

from torchleak.record.compiled_steps import unique_graphs

# The handles of the hooks to lift (torch's RemovableHandle: ``id``, ``hooks_dict_ref``).
Handles = Callable[[], list[Any]]

TRACE_MODULE = "torch.export._trace"
TRACE_FUNCTION = "_export"
# Modules that may hold their own name for the tracer (bound when they loaded).
BINDERS = ("torch.export.", "torch._export")


class ExportLift:
    def __init__(self, handles: Handles) -> None:
        self._handles = handles
        self._wrapped: tuple[Any, Any] | None = None  # torch's tracer, our wrapper
        self._finder: HandOverOnLoad | None = None
        self.graphs_made = 0  # dynamo graphs made inside exports

    def install(self) -> None:
        """Wrap torch's export tracer now if loaded, else as soon as it loads."""
        if self._wrapped is not None or self._finder is not None:
            return
        module = sys.modules.get(TRACE_MODULE)
        if module is not None:
            self._wrap(module)
        elif "torch" in sys.modules:
            self._finder = HandOverOnLoad(TRACE_MODULE, self._loaded)
            sys.meta_path.insert(0, self._finder)

    def uninstall(self) -> None:
        """Put torch's own back wherever ours is, unless someone wrapped ours since
        (theirs stays)."""
        self._drop_finder()
        if self._wrapped is None:
            return
        original, wrapper = self._wrapped
        self._wrapped = None
        _swap(wrapper, original)

    def _loaded(self, module: ModuleType) -> None:
        self._drop_finder()
        self._wrap(module)

    def _drop_finder(self) -> None:
        finder, self._finder = self._finder, None
        if finder is not None and finder in sys.meta_path:
            sys.meta_path.remove(finder)

    def _wrap(self, module: ModuleType) -> None:
        original = getattr(module, TRACE_FUNCTION, None)
        if original is None:
            return
        lift = weakref.ref(self)

        @functools.wraps(original)
        def traced(*args: Any, **kwargs: Any) -> Any:
            alive = lift()
            if alive is None:
                return original(*args, **kwargs)
            with alive.lifted():
                return original(*args, **kwargs)

        _swap(original, traced)
        self._wrapped = (original, traced)

    @contextmanager
    def lifted(self) -> Iterator[None]:
        graphs_before = unique_graphs()
        taken: list[tuple[dict[int, Any], int, Any]] = []
        for handle in self._handles():
            hooks = handle.hooks_dict_ref()
            if hooks is not None and handle.id in hooks:
                taken.append((hooks, handle.id, hooks.pop(handle.id)))
        try:
            yield
        finally:
            self.graphs_made += max(0, unique_graphs() - graphs_before)
            for hooks, key, hook in taken:
                hooks[key] = hook
                # Keys are registration order: ours go back where they were.
                if any(other > key for other in hooks):
                    ordered = sorted(hooks.items())
                    hooks.clear()
                    hooks.update(ordered)


class HandOverOnLoad(importlib.abc.MetaPathFinder):
    """Finds one module the way the finders after it would, and hands it to ``loaded``
    once its code has run (before the import statement that loaded it returns)."""

    def __init__(self, name: str, loaded: Callable[[ModuleType], None]) -> None:
        self._name = name
        self._loaded = loaded

    def find_spec(self, fullname: str, path: Sequence[str] | None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        if fullname != self._name:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                break
        else:
            return None
        loader = spec.loader
        exec_module = getattr(loader, "exec_module", None)
        if exec_module is None:
            return spec
        loaded = self._loaded

        def exec_then_hand_over(module: ModuleType) -> None:
            try:
                exec_module(module)
            finally:  # torch's loader as it was: this closure must not outlive the load
                vars(loader).pop("exec_module", None)
            try:
                loaded(module)
            except Exception:  # noqa: BLE001 - never raise into the program's import
                pass

        try:
            loader.exec_module = exec_then_hand_over  # type: ignore[union-attr]
        except (AttributeError, TypeError):  # a loader with no attributes of its own
            pass
        return spec


def _swap(old: Any, new: Any) -> None:
    """Every name torch's export modules hold for ``old`` now names ``new``."""
    for name, module in list(sys.modules.items()):
        if name.startswith(BINDERS) and getattr(module, TRACE_FUNCTION, None) is old:
            setattr(module, TRACE_FUNCTION, new)
