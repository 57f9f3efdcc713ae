"""Phase marks with no code changes: a model switched to eval() opens a validation phase.

We wrap ``nn.Module.train`` (which ``eval()`` calls): only the outermost call counts, so
``model.eval()`` recursing into its children makes one mark, not hundreds. Inside a
``torch.compile``d region the wrapper steps aside (the compiler sees the original).
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from typing import Any

import torch

_local = threading.local()


class ModeWatcher:
    def __init__(self, on_mark: Callable[[str], None]) -> None:
        self._on_mark = on_mark
        self._original: Any = None
        self.phase = "train"

    def install(self) -> None:
        original = torch.nn.Module.train
        self._original = original
        watcher = self

        is_compiling = torch.compiler.is_compiling

        def train(module: torch.nn.Module, mode: bool = True) -> torch.nn.Module:
            if is_compiling():
                return original(module, mode)
            depth = getattr(_local, "depth", 0)
            if depth == 0:
                watcher._switched(bool(mode))
            _local.depth = depth + 1
            try:
                return original(module, mode)
            finally:
                _local.depth = depth

        train.__wrapped__ = original  # type: ignore[attr-defined]
        torch.nn.Module.train = train  # type: ignore[method-assign]

    def _switched(self, mode: bool) -> None:
        phase = "train" if mode else "validation"
        if phase != self.phase:
            self.phase = phase
            try:
                self._on_mark("validation_end" if mode else "validation_start")
            except Exception:  # noqa: BLE001 - never raise into the user's code
                pass

    def uninstall(self) -> None:
        if self._original is not None:
            torch.nn.Module.train = self._original  # type: ignore[method-assign]
            self._original = None


class LoaderWatcher:
    """Epoch boundaries with no code changes: a DataLoader iterated again starts a new
    epoch. We wrap ``DataLoader.__iter__`` (once per epoch, never per batch): the first
    iteration of any loader marks ``loader_begin``, each later one of the same loader
    ``loader_epoch`` (its value tells loaders apart). Loaders are remembered weakly."""

    def __init__(self, on_mark: Callable[[str, str | None], None]) -> None:
        self._on_mark = on_mark
        self._original: Any = None
        self._seen: weakref.WeakKeyDictionary[Any, int] = weakref.WeakKeyDictionary()
        self._started = False

    def install(self) -> None:
        from torch.utils.data import DataLoader

        original = DataLoader.__iter__
        self._original = original
        watcher = self

        def __iter__(loader: Any) -> Any:
            watcher._iterated(loader)
            return original(loader)

        __iter__.__wrapped__ = original  # type: ignore[attr-defined]
        DataLoader.__iter__ = __iter__  # type: ignore[method-assign]

    def _iterated(self, loader: Any) -> None:
        try:
            if not self._started:
                self._started = True
                self._on_mark("loader_begin", None)
            index = self._seen.get(loader)
            if index is None:
                self._seen[loader] = len(self._seen)
            else:
                self._on_mark("loader_epoch", str(index))
        except Exception:  # noqa: BLE001 - never raise into the user's code
            pass

    def uninstall(self) -> None:
        if self._original is not None:
            from torch.utils.data import DataLoader

            DataLoader.__iter__ = self._original  # type: ignore[method-assign]
            self._original = None
