"""The `torchleak top` loop: poll, draw, repeat; stop after the final frame or on Ctrl-C."""

from __future__ import annotations

import time
from pathlib import Path

from rich.console import Console
from rich.live import Live

from torchleak.views.live import LiveTrace
from torchleak.views.top_frame import render_frame


def watch(run: Path, interval: float = 0.5, once: bool = False, console: Console | None = None) -> int:
    """Follow ``run`` until its status leaves 'running' (or its writer dies). Returns 0."""
    console = console or Console()
    trace = LiveTrace(run)
    try:
        if once or not console.is_terminal:
            console.print(render_frame(trace.poll(), interval))
            return 0
        with Live(console=console, auto_refresh=False, transient=False,
                  redirect_stdout=False, redirect_stderr=False) as live:
            _loop(trace, live, interval)
    except KeyboardInterrupt:
        pass  # Ctrl-C is how one leaves top: not an error
    finally:
        trace.close()
    return 0


def _loop(trace: LiveTrace, live: Live, interval: float) -> None:
    while True:
        state = trace.poll()
        live.update(render_frame(state, interval), refresh=True)
        if state.status != "running":
            return
        time.sleep(interval)
