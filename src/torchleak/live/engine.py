"""The one engine behind every entry point: ``torchleak run``, ``torchleak.monitor()``, the
framework callbacks and the pytest marker all start a ``Monitor``.

A Monitor claims a run folder, starts the recorder (torch probes join when the program
imports torch), the live detector (findings as they are called, warnings on stderr,
``on_leak`` callbacks) and the guard; at the end it writes the final Report into the
trace and returns it.
"""

from __future__ import annotations

import os
import sqlite3
import sys
import threading
import time
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from torchleak.analysis import build_report, load
from torchleak.errors import OutputNotWritable, UsageError
from torchleak.live.callbacks import GuardEvent, leak_callbacks
from torchleak.live.control import ControlServer, start_control
from torchleak.live.detector import LiveDetector
from torchleak.live.guard import GUARD_MODES, Guard, GuardSettings
from torchleak.live.torch_import import when_torch_imported
from torchleak.live.warnings import WarningPolicy
from torchleak.record.metadata import run_metadata
from torchleak.record.session import Recorder
from torchleak.report import Finding, Report
from torchleak.trace.catalog import runs_dir
from torchleak.trace.judgements import judgement_row
from torchleak.trace.reader import open_trace
from torchleak.trace.schema import TRACE_FILENAME
from torchleak.trace.writer import TraceClaimed
from torchleak.system.limits import memory_limit, parse_size
from torchleak.system.safe import apply_safe, parse_mode, slack_trimmer, stop_trimmer
from torchleak.system.workers import cap_dataloaders
from torchleak.units import format_bytes
from torchleak.vocab import FindingKind, RunStatus

_active: Monitor | None = None
_active_lock = threading.Lock()

# Growth no holder explains: the walks are sent to look again.
UNEXPLAINED = frozenset({FindingKind.MEMORY, FindingKind.NATIVE_MEMORY, FindingKind.TENSORS})


def active_monitor() -> Monitor | None:
    return _active


@dataclass
class MonitorOptions:
    out: str | Path | None = None  # the run folder (default: <runs dir>/<name>-<time>)
    name: str | None = None
    budget: float = 0.01  # share of wall time for the expensive probes
    limit: int | str | None = None  # bytes, or a size like "12GiB"
    guard: str = "warn"  # warn | checkpoint | stop
    guard_share: float = 0.90
    guard_minutes: float = 10.0
    quiet: bool = False  # no warnings or summary of our own on stderr
    warnings: bool = True  # live warning blocks while training runs
    script: str | None = None  # what ran (the analysis points at its source lines)
    argv: list[str] = field(default_factory=list)
    stream: IO[str] | None = None  # where our lines go (default: stderr at start)
    annotate: Callable[[Report], None] | None = None  # adds to the final report before it is kept
    control: bool | None = None  # attach: False = no eval/cleanup; None = $TORCHLEAK_CONTROL
    safe: str | None = None  # --safe mode: 'default', 'workers', 'mmap' (or a combination)
    # A framework's own rank and world size (Lightning, Accelerate); None: the launcher's
    # environment (RANK, WORLD_SIZE).
    rank: int | None = None
    world_size: int | None = None
    # ``torchleak run``: the process is the run, so the budget counts its start-up (the
    # program's ``import torch``); in-process (a notebook, a test, a framework callback)
    # the run starts with the monitor, not with the process it lives in.
    owns_process: bool = False

    def validate(self) -> None:
        if not 0 < self.budget <= 1:
            raise UsageError(f"the budget must be a percentage in (0, 100], got "
                             f"{self.budget * 100:g}")
        if self.guard not in GUARD_MODES:
            raise UsageError(f"--guard must be one of {', '.join(GUARD_MODES)}, got "
                             f"{self.guard!r}")
        if not 0 < self.guard_share <= 1:
            raise UsageError(f"the guard share must be in (0, 1], got {self.guard_share}")
        if self.limit is not None:
            try:
                parse_size(self.limit)
            except UsageError as err:
                raise UsageError(f"--limit: {err}") from None
        if self.safe is not None:
            parse_mode(self.safe)  # a one-line UsageError for an unknown mode


def rank_info(options: MonitorOptions | None = None) -> tuple[int | None, int]:
    """(rank, world size) under a multi-process launcher, else (None, 1)."""
    if options is not None and options.world_size is not None:
        world = max(1, int(options.world_size))
        return (int(options.rank or 0) if world > 1 else None), world
    try:
        world = int(os.environ.get("WORLD_SIZE", "1"))
        rank = int(os.environ["RANK"]) if world > 1 and "RANK" in os.environ else None
    except ValueError:
        return None, 1
    return rank, world


def run_folder(options: MonitorOptions, stem: str) -> Path:
    """The folder of this run: ``--out``, else one per launch in the runs folder. All
    ranks of one launch share it (keyed by the launcher's run id), one trace per rank."""
    rank, _world = rank_info(options)
    if options.out:
        base = Path(options.out)
    else:
        name = options.name or stem
        launch = launch_key() if rank is not None else None
        if launch:
            base = runs_dir() / f"{name}-{launch}"
        else:
            base = runs_dir() / f"{name}-{time.strftime('%Y%m%d-%H%M%S')}"
            if rank is None:
                base = _free_name(base)
    return base / f"rank{rank}" if rank is not None else base


def launch_key() -> str | None:
    """What the ranks of one launch share: torchrun's run id, or (its default id 'none')
    the start time and pid of the local agent that started every rank of this node."""
    launch = os.environ.get("TORCHELASTIC_RUN_ID")
    if launch is None:
        return None
    if launch != "none":
        return launch
    import psutil

    try:
        agent = psutil.Process(os.getppid())
        started = time.strftime("%Y%m%d-%H%M%S", time.localtime(agent.create_time()))
    except (psutil.Error, OSError, ValueError):
        return None
    return f"{started}-{agent.pid}"


def _free_name(base: Path) -> Path:
    candidate, suffix = base, 1
    while candidate.exists():
        suffix += 1
        candidate = base.with_name(f"{base.name}~{suffix}")
    return candidate


def claim_folder(folder: Path) -> Path:
    """Create the run folder and check it can hold a trace (before anything runs)."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        probe = folder / ".torchleak-write-test"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as err:
        raise OutputNotWritable(f"cannot write the run folder {folder}: "
                                f"{err.strerror or err} (pass --out DIR with a writable "
                                "folder)") from None
    trace = folder / TRACE_FILENAME
    if trace.exists():
        raise OutputNotWritable(f"{folder} already holds a trace: pass another --out folder")
    return trace


class Monitor:
    """Record, watch and guard one run in this process."""

    def __init__(self, options: MonitorOptions | None = None, **kwargs: Any) -> None:
        self.options = options or MonitorOptions(**kwargs)
        self.options.validate()
        self.report: Report | None = None
        self.recorder: Recorder | None = None
        self.folder: Path | None = None
        self._stream = self.options.stream or sys.stderr
        self._detector: LiveDetector | None = None
        self._guard: Guard | None = None
        self._control: ControlServer | None = None
        self._cancel_import_wait: Any = None
        self._policy = WarningPolicy()
        self._hunted: set[str] = set()  # signals whose unexplained growth sent the walks
        self.safe_changes: list[Any] = []
        self._safe_stack = ExitStack()
        self._caps: Any = None
        self._cancel_caps: Any = None
        self._started = False
        self.status: str | None = None

    @property
    def trace(self) -> Path | None:
        return self.folder / TRACE_FILENAME if self.folder else None

    @property
    def live_report(self) -> Report | None:
        """The live detector's latest Report (None before its first pass)."""
        return self._detector.latest if self._detector is not None else None

    @property
    def guard(self) -> Guard | None:
        return self._guard

    @property
    def running(self) -> bool:
        return self._started

    # lifecycle -------------------------------------------------------------------------
    def start(self) -> Monitor:
        global _active
        with _active_lock:
            if _active is not None:
                raise UsageError("a torchleak monitor is already running in this process")
            _active = self
        try:
            self._start()
        except BaseException:
            with _active_lock:
                _active = None
            raise
        return self

    def _start(self) -> None:
        opts = self.options
        stem = Path(opts.script).stem if opts.script else "run"
        self.folder = run_folder(opts, stem)
        trace = claim_folder(self.folder)
        rank, world = rank_info(opts)
        meta = run_metadata(opts.argv or [opts.script or ""], opts.script or "", opts.name
                            or stem, opts.budget * 100)
        meta.update(rank=rank, world_size=world, guard_settings={
            "mode": opts.guard, "share": opts.guard_share, "minutes": opts.guard_minutes})
        found = memory_limit(opts.limit)
        limit = (found.bytes, found.name) if found is not None else (0, "unknown")
        # The one decision of what the limit is: every projection reads it from here.
        meta["limit"] = {"bytes": limit[0], "name": limit[1]} if found is not None else None
        self.safe_changes = apply_safe(opts.safe) if opts.safe is not None else []
        meta["safe"] = [change.to_dict() for change in self.safe_changes]
        if opts.safe is not None and "workers" in parse_mode(opts.safe):
            # DataLoader caps patch torch's class: only once the program has imported it.
            self._cancel_caps = when_torch_imported(self._cap_dataloaders)
        try:
            self.recorder = Recorder(trace, meta, budget=opts.budget, on_fault=self._fault,
                                     since_process_start=opts.owns_process)
        except TraceClaimed:
            raise OutputNotWritable(f"{self.folder} already holds a trace: another run "
                                    "claimed it; pass another --out folder") from None
        except (OSError, sqlite3.Error) as err:
            raise OutputNotWritable(f"cannot create the trace in {self.folder}: {err} (pass "
                                    "--out DIR on a disk with room)") from None
        self.recorder.start()
        self._cancel_import_wait = when_torch_imported(self.recorder.attach_torch)
        recorder = self.recorder
        self._detector = LiveDetector(trace, recorder.writer, self._on_live,
                                      current_step=lambda: recorder.step,
                                      started=recorder.scheduler.started,
                                      budget=opts.budget, feed=recorder)
        self._detector.start()
        self._guard = Guard(GuardSettings(opts.guard, opts.guard_share, opts.guard_minutes),
                            limit[0], limit[1], recorder, str(self.folder),
                            workers_uss=lambda: recorder.facts.workers_uss,
                            live_projection=self._projection, on_fire=self._on_guard,
                            counted=_cgroup_counter(found))
        self._guard.start()
        self._control = start_control(recorder, self.folder, opts.control, self._live_report,
                                      say=None if opts.quiet else self.say)
        self._started = True

    def stop(self, status: str = RunStatus.FINISHED.value, exit_code: int | None = 0,
             analyse: bool = True) -> Report | None:
        """End the run: the final Report is written into the trace and returned."""
        global _active
        if not self._started or self.recorder is None:
            return self.report
        self._started = False
        if self._control is not None:
            self._control.stop()  # first: nothing attached runs while the run ends
        self._end_safe()
        if self._cancel_import_wait is not None:
            self._cancel_import_wait()
        if self._guard is not None:
            self._guard.stop()
            guard = self._guard.summary()
            if guard is not None:
                self.recorder.writer.set_meta("guard", guard)
                if guard["mode"] == "stop" and "stopped" in guard["actions"]:
                    status = RunStatus.STOPPED.value
        if self._detector is not None:
            self._detector.stop()
            self.recorder.writer.set_meta("live_detector", self._detector.cost())
        self.status = status
        self.recorder.stop(status, exit_code)
        if analyse:
            self.report = self._final_report()
        self.recorder.close()
        with _active_lock:
            if _active is self:
                _active = None
        return self.report

    def _cap_dataloaders(self) -> None:
        self._caps = self._safe_stack.enter_context(cap_dataloaders())

    def _end_safe(self) -> None:
        """Stop --safe's heap trimmer and DataLoader caps, and keep what they did."""
        if self._cancel_caps is not None:
            self._cancel_caps()
        self._safe_stack.close()
        if self.recorder is None:
            return
        changes = [c.to_dict() for c in self.safe_changes]
        if self._caps is not None:
            changes += [c.to_dict() for c in self._caps.changes]
        if changes:
            self.recorder.writer.set_meta("safe", changes)
        trimmer = slack_trimmer() if self.safe_changes else None
        if trimmer is not None:
            self.recorder.writer.set_meta("safe_trims", trimmer.state.to_dict())
        if self.safe_changes:
            stop_trimmer()

    def _final_report(self) -> Report | None:
        """The analysis of the whole trace, streamed from the file (bounded memory)."""
        assert self.recorder is not None and self.trace is not None
        try:
            with open_trace(self.trace) as opened:
                report = build_report(load(opened.conn))
            report.run["trace"] = str(self.trace)
            if self.options.annotate is not None:
                self.options.annotate(report)
            self.recorder.writer.judge(judgement_row("final", report.steps, report.to_dict()))
            self.recorder.writer.flush()
            return report
        except Exception as err:  # noqa: BLE001 - the trace is kept whatever happens here
            self.recorder.out.event("analysis_failed", "analysis", f"{type(err).__name__}: {err}")
            self.recorder.writer.flush()
            self.say(f"torchleak: analysis failed ({type(err).__name__}: {err}); the trace "
                     f"is kept at {self.trace}")
            return None

    # live events -------------------------------------------------------------------------
    def _on_live(self, report: Report, fired: list[Finding]) -> None:
        if self.recorder is not None and any(f.signal.startswith("cuda") for f in fired):
            # The allocator's own history from now on: saved at the guard or later.
            self.recorder.request(lambda frame: self.recorder.start_cuda_history())  # type: ignore[union-attr]
        suspected = [f.holder_path for f in report.serious if f.holder_path and not f.called]
        if self.recorder is not None and suspected:
            self.recorder.confirm(suspected)  # sample them densely: is it still growing?
        unexplained = {f.signal for f in report.serious if f.kind in UNEXPLAINED}
        if self.recorder is not None and unexplained - self._hunted:
            self._hunted |= unexplained
            self.recorder.hunt()  # growth no holder explains: walk again to find who grows
        for finding in fired:
            for callback in leak_callbacks():
                try:
                    callback(finding)
                except Exception as err:  # noqa: BLE001 - a user callback never stops us
                    if self.recorder is not None:
                        self.recorder.out.event("callback_failed", "on_leak",
                                            f"{type(err).__name__}: {err}")
        if self.options.quiet or not self.options.warnings:
            return
        block = self._policy.warning(report, fired, time.monotonic())
        if block:
            self.say(block)

    def _live_report(self) -> Report | None:
        return self._detector.latest if self._detector is not None else None

    def _projection(self) -> tuple[float | None, Any]:
        report = self._detector.latest if self._detector is not None else None
        if report is None:
            return None, None
        for finding in report.called:
            if finding.oom is not None and finding.oom.seconds_to_oom is not None:
                return finding.oom.seconds_to_oom, finding
        return None, None

    def _on_guard(self, event: GuardEvent) -> None:
        if self.recorder is not None:
            self.recorder.out.event("guard", event.mode, f"{event.reason}: memory "
                                f"{format_bytes(event.memory_bytes)} of {event.limit_name} "
                                f"{format_bytes(event.limit_bytes)}")
        if not self.options.quiet:
            from torchleak.views.live import format_guard

            self.say(format_guard(event))

    def _fault(self, reason: str) -> None:
        self.say(f"torchleak: recording switched off ({reason}); your program goes on "
                 "unchanged")

    def say(self, text: str) -> None:
        from torchleak.views.console import emit

        emit(text, self._stream)

    # the API --------------------------------------------------------------------------------
    def __enter__(self) -> Monitor:
        return self.start()

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        self.stop(*exit_status(exc))
        if self.report is not None and not self.options.quiet:
            from torchleak.views.summary import format_summary

            self.say(format_summary(self.report, self.trace))


def _cgroup_counter(limit: Any) -> Callable[[], int | None] | None:
    """When the limit is a cgroup's, the guard reads what the kernel counts against it."""
    if limit is None or not getattr(limit, "cgroup", None):
        return None
    from torchleak.system.limits import cgroup_working_set

    return lambda: cgroup_working_set(limit.cgroup, limit.cgroup_version)


def exit_status(exc: BaseException | None) -> tuple[str, int]:
    """(run status, exit code) of a monitored block that ended with ``exc``."""
    from torchleak.live.guard import GuardStop

    if exc is None:
        return RunStatus.FINISHED.value, 0
    if isinstance(exc, GuardStop):
        return RunStatus.STOPPED.value, exc.code if isinstance(exc.code, int) else 1
    return RunStatus.CRASHED.value, 1
