"""``torch.export`` traced as if torchleak were not there.

While no optimizer step has been seen, torchleak keeps two global module hooks
(``steps.ForwardSteps``). A strict ``torch.export.export`` fails while any global module
hook exists ("Attempted to inline function marked as skipped: ModuleToTrace.forward", the
same with a hook of the program's own), so an export script, or a training script that
exports before its first step, would fail only when recorded. ``torch.export.export`` is
wrapped so that our two hooks are lifted out of torch's hook tables for the call and put
back after, under the same keys in the same order (a compiled module's guards see the
tables as they were: no recompile). The program's own hooks stay. An export is no step.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

# The handles of the hooks to lift (torch's RemovableHandle: ``id``, ``hooks_dict_ref``).
Handles = Callable[[], list[Any]]


class ExportLift:
    def __init__(self, handles: Handles) -> None:
        self._handles = handles
        self._wrapped: tuple[Any, Any, Any] | None = None  # module, original, wrapper

    def install(self) -> None:
        """Wrap ``torch.export.export`` where torch has loaded it (never imports it)."""
        module = sys.modules.get("torch.export")
        original = getattr(module, "export", None)
        if original is None or self._wrapped is not None:
            return
        lifted = self.lifted

        @functools.wraps(original)
        def export(*args: Any, **kwargs: Any) -> Any:
            with lifted():
                return original(*args, **kwargs)

        module.export = export  # type: ignore[union-attr]
        self._wrapped = (module, original, export)

    def uninstall(self) -> None:
        """Put torch's own back, unless someone wrapped ours since (theirs stays)."""
        if self._wrapped is None:
            return
        module, original, wrapper = self._wrapped
        self._wrapped = None
        if getattr(module, "export", None) is wrapper:
            module.export = original

    @contextmanager
    def lifted(self) -> Iterator[None]:
        taken: list[tuple[dict[int, Any], int, Any]] = []
        for handle in self._handles():
            hooks = handle.hooks_dict_ref()
            if hooks is not None and handle.id in hooks:
                taken.append((hooks, handle.id, hooks.pop(handle.id)))
        try:
            yield
        finally:
            for hooks, key, hook in taken:
                hooks[key] = hook
                # Keys are registration order: ours go back where they were.
                if any(other > key for other in hooks):
                    ordered = sorted(hooks.items())
                    hooks.clear()
                    hooks.update(ordered)
