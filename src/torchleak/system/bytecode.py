"""torchleak's own modules keep their compiled bytecode, whatever the environment says.

With ``PYTHONDONTWRITEBYTECODE`` set (common in containers) and torchleak installed from
its source (``pip install -e``: nothing is compiled at install), every ``torchleak``
command compiled its modules anew: ~65 ms at the start of each run, more than recording
costs a run of a few seconds. So the package's own ``__pycache__`` is written once, where
the install lets us (a read-only install stays as it is, silently). The program's
modules, torch's and everything else keep the environment's setting.
"""

from __future__ import annotations

import os
import sys
from importlib.util import cache_from_source
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent


def keep_own_bytecode() -> None:
    """Compile the package's modules whose bytecode is missing or stale (one ``stat``
    pair when it is all there)."""
    if not sys.dont_write_bytecode:
        return  # Python writes it itself as it imports
    source = PACKAGE / "cli.py"  # written with all the others: one stands for them
    try:
        if os.stat(cache_from_source(str(source))).st_mtime >= os.stat(source).st_mtime:
            return
    except (OSError, NotImplementedError):  # none yet, or no cache in this interpreter
        pass
    if not os.access(PACKAGE, os.W_OK):
        return  # a read-only install: compiling all of it at every start would cost more
    import compileall

    try:
        compileall.compile_dir(PACKAGE, quiet=2)
    except OSError:
        pass
