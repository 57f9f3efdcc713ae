"""pytest plugin (installed with torchleak): ``@pytest.mark.no_leak`` fails a test whose
training loop leaks.

The marked test's body runs under the one engine (a quiet ``torchleak.monitor()``); when
it ends, the test fails if the run's verdict is a leak, with the holder, the rate, the
source line and the fix in the failure message. What decides is the recorded growth per
step (holder sizes and the process's memory at each step boundary), never a wall-clock
threshold, so a healthy loop passes however busy the CI machine is.

``@pytest.mark.no_leak(steps=50, tolerance="1KiB")``:
- ``steps``: the loop must make at least this many steps (an optimizer step each, or a
  ``torchleak.watch().step()``, or the model's forward calls in a loop with no optimizer);
  fewer fail the test, since the check could not judge. Without it a too-short loop passes
  with a warning that it could not be judged.
- ``tolerance``: findings that grow at most this much per step (bytes, or a size like
  "1KiB") do not fail the test.

``--torchleak-keep DIR`` keeps every marked test's trace under DIR (default: pytest's
temporary folder), for ``torchleak report``.
"""

from __future__ import annotations

import tempfile
import warnings
from collections.abc import Generator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

MARKER = "no_leak"


class LeakCheckWarning(pytest.PytestWarning):
    """A marked test whose loop could not be judged (too few steps)."""


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("torchleak")
    group.addoption("--torchleak-keep", metavar="DIR", default=None,
                    help="keep the trace of every @pytest.mark.no_leak test under DIR")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", f"{MARKER}(steps=None, tolerance=0): fail the test when the training loop "
        "it runs leaks memory (torchleak); steps: the fewest steps it must make; tolerance: "
        "growth per step (bytes or '1KiB') that is allowed")


@dataclass
class LeakCheck:
    steps: int | None = None
    tolerance: float = 0.0

    @classmethod
    def from_marker(cls, marker: pytest.Mark) -> LeakCheck:
        """The marker's arguments, or one clear line saying what is wrong."""
        args = dict(marker.kwargs)
        if marker.args:
            args.setdefault("steps", marker.args[0])
        unknown = sorted(set(args) - {"steps", "tolerance"})
        if unknown:
            raise ValueError(f"@pytest.mark.{MARKER} takes steps= and tolerance=, not "
                             f"{', '.join(unknown)}")
        steps = args.get("steps")
        if steps is not None and (type(steps) is not int or steps < 1):
            raise ValueError(f"@pytest.mark.{MARKER}(steps=...) must be a positive whole "
                             f"number, got {steps!r}")
        return cls(steps, _size(args.get("tolerance", 0)))

    def failure(self, report: Any) -> str | None:
        """Why the test fails, or None when it passes."""
        if self.steps is not None and report.steps < self.steps:
            return (f"the loop made {report.steps} steps; @pytest.mark.{MARKER}(steps="
                    f"{self.steps}) needs at least {self.steps} to judge it (a step is an "
                    "optimizer step, a torchleak.watch().step(), or one forward call of the "
                    "outermost model in a loop with no optimizer)")
        leaks = [f for f in report.serious if (f.bytes_per_step or 0.0) > self.tolerance
                 or f.bytes_per_step is None]
        if report.verdict != "leak" or not leaks:
            return None
        return _leak_message(report, leaks)


def _size(value: Any) -> float:
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0:
        return float(value)
    if isinstance(value, str):
        from torchleak.errors import UsageError
        from torchleak.units import parse_bytes

        try:
            return float(parse_bytes(value))
        except UsageError as error:
            raise ValueError(f"@pytest.mark.{MARKER}(tolerance=...): {error}") from None
    raise ValueError(f"@pytest.mark.{MARKER}(tolerance=...) must be bytes or a size like "
                     f"'1KiB', got {value!r}")


def _leak_message(report: Any, leaks: list[Any]) -> str:
    from torchleak.views.summary import finding_lines

    noun = "holder or signal grows" if len(leaks) == 1 else "holders or signals grow"
    lines = [f"the training loop leaks: {len(leaks)} {noun} without bound over "
             f"{report.steps} steps"]
    for finding in leaks[:3]:
        lines.extend(finding_lines(finding))
    trace = report.run.get("trace")
    if trace:
        lines.append(f"trace: {trace}  (torchleak report {Path(trace).parent})")
    return "\n".join(lines)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, Any, None]:
    marker = item.get_closest_marker(MARKER)
    if marker is None:
        yield
        return
    problem: str | None = None
    try:
        check = LeakCheck.from_marker(marker)
    except ValueError as err:
        problem = str(err)
    if problem is not None:
        # Outside the except block: inside it the failure would carry the ValueError as
        # its context, and pytest would print the message twice.
        outcome = yield
        _fail(outcome, problem)
        return
    monitor = _start(item)
    outcome = yield
    if monitor is None:
        return
    report = monitor.stop("crashed" if outcome.excinfo else "finished",
                          1 if outcome.excinfo else 0)
    if outcome.excinfo is not None:
        return  # the test failed on its own: that failure is the one to show
    if report is None:
        warnings.warn(LeakCheckWarning(f"{item.nodeid}: the leak check could not analyse "
                                       f"the run (trace kept at {monitor.trace})"))
        return
    failure = check.failure(report)
    if failure is not None:
        _fail(outcome, failure)
    elif report.verdict == "inconclusive":
        warnings.warn(LeakCheckWarning(f"{item.nodeid}: not judged: {report.reason}"))


def _start(item: pytest.Item) -> Any:
    """A quiet monitor for this test, or None (one warning) when it cannot record."""
    from torchleak.check.crossref import annotate
    from torchleak.live.engine import active_monitor
    from torchleak.live.inprocess import InProcessMonitor, safe_options

    if active_monitor() is not None:
        warnings.warn(LeakCheckWarning(f"{item.nodeid}: a torchleak monitor already records "
                                       "this process; the test's own loop is not judged"))
        return None
    path = getattr(item, "path", None)  # the test's file: findings point at its lines
    options = safe_options({"out": str(_folder(item)), "name": item.name, "quiet": True,
                            "annotate": annotate,
                            "warnings": False, "script": str(path) if path else None,
                            "argv": [str(path or item.nodeid)]}, "no_leak")
    monitor = InProcessMonitor(options)
    monitor.start()
    return monitor if monitor.running else None


def _folder(item: pytest.Item) -> Path:
    keep = item.config.getoption("--torchleak-keep")
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in item.name)[:60]
    if keep:
        base = Path(keep)
    else:
        factory = getattr(item.config, "_tmp_path_factory", None)
        base = factory.getbasetemp() if factory is not None else Path(tempfile.mkdtemp())
        base = base / "torchleak"
    folder, n = base / safe, 1
    while folder.exists():
        n += 1
        folder = base / f"{safe}-{n}"
    return folder


def _fail(outcome: Any, message: str) -> None:
    """Fail the test with ``message`` as its whole report (no traceback of ours)."""
    try:
        pytest.fail(message, pytrace=False)
    except pytest.fail.Exception as failure:
        failure.__suppress_context__ = True  # only this message, never a chained one
        outcome.force_exception(failure)
