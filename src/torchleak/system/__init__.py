"""Facts about this machine and this process, and what can be done about memory here.

Nothing in this package imports torch when it is imported; the functions that need
torch import it only when it is already loaded or when asked to.

- ``limits``: the real memory limit (cgroup v1/v2, RAM, swap, ``--limit``) and
  ``parse_size``.
- ``allocator``: which malloc is in use; glibc's ``malloc_trim``/``mallopt``/``mallinfo2``.
- ``cleanup``: ``cleanup()`` frees what can be freed now and says what each step freed.
- ``safe`` / ``trim`` / ``workers``: the ``--safe`` settings, the budgeted heap trimmer
  and the DataLoader caps.
- ``doctor``: the checks behind ``torchleak doctor``.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "CleanupResult": "cleanup", "cleanup": "cleanup",
    "MemoryLimit": "limits", "memory_limit": "limits", "parse_size": "limits",
    "SafeChange": "safe_change", "apply_safe": "safe", "plan_safe": "safe",
    "SlackState": "trim", "trim_if_slack": "trim",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    # Submodules load on first use, so importing one of them stays cheap.
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"torchleak.system.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module 'torchleak.system' has no attribute {name!r}")
