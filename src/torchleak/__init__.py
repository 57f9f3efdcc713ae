"""torchleak: find, explain and stop memory leaks in PyTorch training.

The import is light (no torch): ``torchleak.watch`` and ``torchleak.mark`` work whether
or not the script runs under ``torchleak run``.
"""

from __future__ import annotations

from torchleak.api import mark, watch

__all__ = ["mark", "watch"]
__version__ = "0.1.0"


def __getattr__(name: str) -> object:
    # ``torchleak.cleanup()`` is loaded on first use: most scripts never call it.
    if name == "cleanup":
        from torchleak.system.cleanup import cleanup

        return cleanup
    raise AttributeError(f"module 'torchleak' has no attribute {name!r}")
