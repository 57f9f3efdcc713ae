"""A stand-in training process for `top` tests: writes a trace live, WAL mode, then finishes.

Usage: python live_writer.py TRACE_DIR STEPS SECONDS_PER_STEP [--no-finish]
With --no-finish it exits leaving status 'running' (a killed run, as `top` must see it).
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from torchleak.trace.writer import TraceWriter

MIB = 1024 * 1024


def main() -> int:
    folder, steps, pause = Path(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
    folder.mkdir(parents=True, exist_ok=True)
    writer = TraceWriter(folder / "trace.sqlite", flush_interval=0.05)
    for key, value in {"name": "live", "script": "live_train.py", "status": "running",
                       "pid": os.getpid(), "start_time": time.time()}.items():
        writer.set_meta(key, value)
    writer.flush()
    writer.start()
    for step in range(1, steps + 1):
        writer.add("steps", (step, time.time(), pause * 1000, 0, "train",
                             300 * MIB + step * MIB, 200 * MIB + step * MIB, 0, 0.01))
        if step % 5 == 0:
            writer.add("census", (step, time.time(), 1.0, "schedule", 100 + step, step * MIB,
                                  step, step, 0, 1000))
        time.sleep(pause)
    if "--no-finish" in sys.argv:
        writer.flush()
        os._exit(0)  # like a kill: no final status, WAL left behind
    writer.set_meta("status", "finished")
    writer.set_meta("end_time", time.time())
    writer.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
