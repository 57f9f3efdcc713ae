"""Record one run end to end: start probes, run the user's code, analyse, summarise."""

from __future__ import annotations

import json
import signal
import sys
from pathlib import Path
from types import FrameType
from typing import Any

from torchleak.errors import EXIT_LEAK
from torchleak.record.metadata import run_metadata
from torchleak.record.runner import Target, run_target
from torchleak.record.session import Recorder
from torchleak.trace.schema import STATUS_CRASHED, STATUS_FINISHED, TRACE_FILENAME


def record_run(target: Target, out_dir: Path, name: str, budget: float,
               json_path: Path | None = None, fail_on_leak: bool = False,
               quiet: bool = False) -> int:
    trace = out_dir / TRACE_FILENAME
    argv = [target.display, *target.args]
    meta = run_metadata(argv, target.display, name, budget * 100)
    recorder = Recorder(trace, meta, budget=budget)
    if not quiet:
        print(f"torchleak: recording {target.display} -> {trace}", file=sys.stderr, flush=True)
    previous_term = _save_on_sigterm(recorder)
    recorder.start()
    code, raised = run_target(target)
    recorder.stop(STATUS_CRASHED if raised else STATUS_FINISHED, code)
    _restore_sigterm(previous_term)
    report = _analyse(recorder, trace, quiet)
    recorder.close()
    sys.stdout.flush()
    if report is not None:
        if json_path is not None:
            json_path.write_text(report.to_json())
        if not quiet:
            from torchleak.summary import print_summary

            print_summary(report, trace)
        if fail_on_leak and code == 0 and report.verdict == "leak":
            return EXIT_LEAK
    elif json_path is not None:
        json_path.write_text(json.dumps({"verdict": "inconclusive", "steps": recorder.step,
                                         "findings": [], "reason": "analysis failed"}))
    return code


def _analyse(recorder: Recorder, trace: Path, quiet: bool) -> Any:
    """Run the analysis on the finished trace; a failure is reported, never fatal."""
    try:
        from torchleak.analysis import analyze_connection

        recorder.writer.flush()
        report = analyze_connection(recorder.writer.connection())
        recorder.writer.set_meta("report", report.to_dict())
        recorder.writer.write_findings([f for f in report.to_dict()["findings"]])
        recorder.writer.flush()
        return report
    except Exception as err:  # noqa: BLE001 - the trace is kept whatever happens here
        recorder.event("analysis_failed", "analysis", f"{type(err).__name__}: {err}")
        recorder.writer.flush()
        if not quiet:
            print(f"torchleak: analysis failed ({type(err).__name__}: {err}); the trace is "
                  f"kept at {trace}", file=sys.stderr)
        return None


def _save_on_sigterm(recorder: Recorder) -> Any:
    """On SIGTERM: flush the trace, mark it killed, then die as the default handler would."""
    def handler(signum: int, frame: FrameType | None) -> None:
        try:
            recorder.writer.set_meta("status", "killed")
            recorder.writer.flush()
        finally:
            signal.signal(signum, signal.SIG_DFL)
            signal.raise_signal(signum)

    try:
        if signal.getsignal(signal.SIGTERM) in (signal.SIG_DFL, None):
            return signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread
        pass
    return None


def _restore_sigterm(previous: Any) -> None:
    if previous is not None:
        signal.signal(signal.SIGTERM, previous)
