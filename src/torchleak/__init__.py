"""torchleak: find, explain and stop memory leaks in PyTorch training.

The import is light (no torch): ``torchleak.watch`` and ``torchleak.mark`` work whether
or not the script runs under ``torchleak run``.
"""

from __future__ import annotations

from torchleak.api import mark, watch

__all__ = ["mark", "watch"]
__version__ = "0.1.0"
