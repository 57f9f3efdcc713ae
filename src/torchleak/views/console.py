"""Where torchleak's own lines go: the stream chosen at start (stderr), robustly.

A script may replace or close ``sys.stdout``/``sys.stderr``; our summary must still reach
the terminal and must never raise. Last resort: the process's file descriptor 2.
"""

from __future__ import annotations

import os
import sys
from typing import IO


def emit(text: str, stream: IO[str] | None = None) -> None:
    line = text if text.endswith("\n") else text + "\n"
    for target in (stream, sys.__stderr__):
        if target is None:
            continue
        try:
            target.write(line)
            target.flush()
            return
        except (OSError, ValueError, AttributeError):
            continue
    try:
        os.write(2, line.encode("utf-8", "replace"))
    except OSError:
        pass
