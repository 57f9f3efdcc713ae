"""Call back once the program has imported torch, without importing it first.

Variables a script sets before its own ``import torch`` (``OMP_NUM_THREADS``,
``CUDA_VISIBLE_DEVICES``, ``PYTORCH_CUDA_ALLOC_CONF``) must act as they would without
torchleak, so torchleak never imports torch itself: a finder on ``sys.meta_path`` waits
for the program's import of ``torch`` and runs the callback right after torch's own
``__init__`` has finished (``torch.optim`` is loaded by then).
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any


class _TorchImportFinder(importlib.abc.MetaPathFinder):
    """One finder, however many callbacks: the first finder that answers wins an import."""

    def __init__(self) -> None:
        self.callbacks: list[Callable[[], None]] = []
        self.starting: list[Callable[[], None]] = []  # run as torch's import begins
        self._busy = False

    def find_spec(self, fullname: str, path: Sequence[str] | None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        if fullname != "torch" or self._busy:
            return None
        self._busy = True
        try:
            spec = _find_with_others(self, fullname, path, target)
        finally:
            self._busy = False
        loader = spec.loader if spec is not None else None
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        original = loader.exec_module
        finder = self

        def exec_module(module: ModuleType) -> None:
            starting, finder.starting = finder.starting, []
            _call_each(starting)
            try:
                original(module)
            finally:
                loader.__dict__.pop("exec_module", None)  # the loader is torch's alone
                finder.remove()
            finder.fire()

        loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec

    def fire(self) -> None:
        callbacks, self.callbacks = self.callbacks, []
        _call_each(callbacks)

    def remove(self) -> None:
        try:
            sys.meta_path.remove(self)
        except ValueError:
            pass


def _call_each(callbacks: list[Callable[[], None]]) -> None:
    for callback in callbacks:
        try:
            callback()
        except Exception:  # noqa: BLE001 - the program's import must succeed whatever we do
            pass


def _find_with_others(me: Any, fullname: str, path: Sequence[str] | None,
                      target: ModuleType | None) -> importlib.machinery.ModuleSpec | None:
    for finder in list(sys.meta_path):
        if finder is me or not hasattr(finder, "find_spec"):
            continue
        spec = finder.find_spec(fullname, path, target)
        if spec is not None:
            return spec
    return None


_finder = _TorchImportFinder()


def when_torch_imported(callback: Callable[[], None],
                        before: Callable[[], None] | None = None) -> Callable[[], None]:
    """Run ``callback`` once torch is imported (now, if it already is), and ``before`` as
    its import begins (never, if it already is imported). Returns a function that cancels
    the wait."""
    if "torch" in sys.modules and hasattr(sys.modules["torch"], "optim"):
        _call_each([callback])
        return lambda: None
    _finder.callbacks.append(callback)
    if before is not None:
        _finder.starting.append(before)
    if _finder not in sys.meta_path:
        sys.meta_path.insert(0, _finder)

    def cancel() -> None:
        if callback in _finder.callbacks:
            _finder.callbacks.remove(callback)
        if before in _finder.starting:
            _finder.starting.remove(before)
        if not _finder.callbacks:
            _finder.remove()

    return cancel
