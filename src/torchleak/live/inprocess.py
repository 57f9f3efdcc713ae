"""``torchleak.monitor()``: the engine for code that starts itself (a notebook cell, a
script, a framework callback, a test), never raising into it.

A bad option value is reported once as a warning and its default used; a run folder that
cannot be written leaves the program running unrecorded, with one warning. While another
monitor records the process (``torchleak run``, a callback, an earlier ``monitor()``),
a new one joins it: it records nothing of its own and its ``stop()`` ends nothing, so a
script written for ``monitor()`` behaves the same under ``torchleak run`` and nested
``with`` blocks never cut the outer run short. A monitor started with ``start()`` and
never stopped ends, with its report, when Python exits.
"""

from __future__ import annotations

import atexit
import dataclasses
import sys
import warnings
from pathlib import Path
from typing import Any

from torchleak.errors import TorchleakError
from torchleak.live.engine import Monitor, MonitorOptions, active_monitor, exit_status
from torchleak.report import Report
from torchleak.vocab import RunStatus

_FIELDS = {f.name for f in dataclasses.fields(MonitorOptions)}


def warn(message: str) -> None:
    """One warning, pointed at the user's line (not ours)."""
    warnings.warn(f"torchleak: {message}", RuntimeWarning, stacklevel=_user_level())


def _user_level() -> int:
    level, frame = 1, sys._getframe(1)
    while frame is not None and frame.f_globals.get("__name__", "").startswith("torchleak"):
        frame = frame.f_back  # type: ignore[assignment]
        level += 1
    return level


def safe_options(options: dict[str, Any], where: str = "monitor") -> MonitorOptions:
    """MonitorOptions from ``options``; each bad value is warned about and left at its
    default, an unknown name is warned about and ignored."""
    accepted = MonitorOptions()
    for key, value in options.items():
        if key not in _FIELDS:
            warn(f"{where}() has no option {key!r} (ignored); options: "
                 f"{', '.join(sorted(_FIELDS - {'annotate', 'stream'}))}")
            continue
        candidate = dataclasses.replace(accepted, **{key: value})
        try:
            dataclasses.replace(candidate).validate()
        except Exception as err:  # noqa: BLE001 - any bad value: the default, with a warning
            default = getattr(accepted, key)
            text = str(err) if isinstance(err, TorchleakError) else (
                f"a {type(value).__name__} where {type(default).__name__} was expected")
            warn(f"{where}({key}={value!r:.60}) is not usable ({text}); using "
                 f"{key}={default!r}")
            continue
        accepted = candidate
    accepted.validate()  # converts a size like "12GiB" to bytes
    if accepted.script is None:
        accepted.script = _main_script()
        accepted.argv = accepted.argv or list(sys.argv)
    return accepted


class InProcessMonitor(Monitor):
    """A Monitor whose start, stop and context manager never raise into the program
    (a guard stop, ``GuardStop``, is the one exit it makes on purpose)."""

    def __init__(self, options: MonitorOptions) -> None:
        super().__init__(options)
        self.joined: Monitor | None = None  # the monitor that was already recording
        self.failed: str | None = None  # why this one records nothing

    def start(self) -> InProcessMonitor:
        if self._started or self.joined is not None:
            return self
        active = active_monitor()
        if active is not None:
            self._join(active)
            return self
        try:
            super().start()
        except TorchleakError as err:
            self.failed = str(err)
            warn(f"not recording ({err}); your program runs on unchanged")
            return self
        except Exception as err:  # noqa: BLE001 - never raise into the program
            self.failed = f"{type(err).__name__}: {err}"
            warn(f"not recording ({self.failed}); your program runs on unchanged")
            return self
        atexit.register(self._at_exit)
        return self

    def _join(self, active: Monitor) -> None:
        self.joined = active
        self.recorder, self.folder = active.recorder, active.folder
        if isinstance(active, InProcessMonitor):
            warn(f"a monitor is already recording this process ({active.trace}); this one "
                 "joins it and records nothing of its own (stop the first one to start anew)")

    def stop(self, status: str = RunStatus.FINISHED.value, exit_code: int | None = 0,
             analyse: bool = True) -> Report | None:
        if self.joined is not None or not self._started:
            return self.report
        atexit.unregister(self._at_exit)
        try:
            report = super().stop(status, exit_code, analyse)
        except Exception as err:  # noqa: BLE001 - never raise into the program
            warn(f"stopping failed ({type(err).__name__}: {err}); the trace is kept at "
                 f"{self.trace}")
            return None
        if report is not None and not self.options.quiet:
            from torchleak.views.summary import format_summary

            self.say(format_summary(report, self.trace))
        return report

    def _at_exit(self) -> None:
        self.stop(RunStatus.FINISHED.value, None)

    def __enter__(self) -> InProcessMonitor:
        return self.start()

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        self.stop(*exit_status(exc))  # stop() prints the summary


def monitor(options: dict[str, Any], where: str = "monitor") -> InProcessMonitor:
    return InProcessMonitor(safe_options(options, where))


def _main_script() -> str | None:
    """The script that runs (the analysis points at its lines); None in a notebook."""
    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None)
    return path if isinstance(path, str) and Path(path).is_file() else None
