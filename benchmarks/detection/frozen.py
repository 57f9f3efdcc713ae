"""Run a script as python does, with the one change ``torchleak run`` makes to how it
runs: the interpreter's start-up objects and torch's import objects are frozen out of the
cyclic collector's sight (``torchleak.live.runner.freeze_startup_objects``). Against this
reference the whole-run ratio shows torchleak's own cost, apart from what the freeze saves.

    python benchmarks/detection/frozen.py script.py [args ...]
"""

from __future__ import annotations

import os
import runpy
import sys

from torchleak.live.runner import freeze_startup_objects


def main() -> None:
    script = os.path.abspath(sys.argv[1])
    sys.argv = sys.argv[1:]
    sys.path[0] = os.path.dirname(script)
    freeze_startup_objects()
    runpy.run_path(script, run_name="__main__")


if __name__ == "__main__":
    main()
