"""torchleak: find, explain and stop memory leaks in PyTorch training.

The import is light (no torch): ``torchleak.watch`` and ``torchleak.mark`` work whether
or not a monitor is active, and cost nothing when none is.
"""

from __future__ import annotations

from torchleak.api import cleanup, mark, monitor, on_guard, on_leak, watch
from torchleak.version import __version__

__all__ = ["__version__", "cleanup", "mark", "monitor", "on_guard", "on_leak", "watch"]

