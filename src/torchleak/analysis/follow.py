"""Follow a run while it is written: the Report ``top`` draws, updated at each poll.

Each poll reads only the rows new since the last one (``RunDataBuilder``), judges the
memory signals on what is recorded so far, and takes the findings the live detector
wrote into the trace (the final ones once the run has ended): ``top`` shows a live
detection as soon as the detector calls it, with the numbers every other screen shows.
"""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path

from torchleak.analysis.charts import all_signals
from torchleak.analysis.series import RunDataBuilder
from torchleak.analysis.signals import judge_signals
from torchleak.analysis.verdict import guard_record, overhead, run_info
from torchleak.errors import TraceError
from torchleak.report import Event, Finding, Report
from torchleak.trace import rows
from torchleak.trace.catalog import RunFolder, run_folder, run_status
from torchleak.trace.judgements import judgement
from torchleak.trace.reader import Trace, open_trace
from torchleak.vocab import RunStatus

RECENT = 600  # points per signal kept for the sparklines


class Follower:
    def __init__(self, run: str | Path) -> None:
        self._trace: Trace = open_trace(run)
        self._builder = RunDataBuilder()
        self.path = self._trace.path
        self.polled_at = 0.0

    def close(self) -> None:
        self._trace.close()

    def poll(self) -> Report:
        try:
            return self._poll()
        except sqlite3.OperationalError as err:
            if "locked" in str(err) or "busy" in str(err):
                time.sleep(0.05)
                return self._poll()
            raise TraceError(f"cannot read {self.path} while following it: {err}") from None
        except sqlite3.DatabaseError as err:
            raise TraceError(f"cannot read {self.path} while following it: {err}") from None

    def _poll(self) -> Report:
        conn = self._trace.conn
        data = self._builder.update(conn)
        status = run_status(data.meta, self.path)
        judged = judge_signals(data)
        signals = [s for s in all_signals(data, judged) if s.name in _SHOWN]
        for signal in signals:
            signal.steps, signal.values = signal.steps[-RECENT:], signal.values[-RECENT:]
        # The final judgement once the run has ended, else the live detector's latest.
        stored = (judgement(conn, "final", report=False) if status is not RunStatus.RUNNING
                  else None) or judgement(conn, "live", report=False)
        findings = _findings(conn, stored.phase) if stored is not None else []
        report = Report(verdict=stored.verdict if stored else "inconclusive", steps=data.steps,
                        findings=findings, signals=signals, run=run_info(data.meta),
                        reason=stored.reason if stored else "",
                        events=[Event(*e) for e in data.events[-3:]],
                        guard=guard_record(data.meta), overhead=overhead(data),
                        source=stored.phase if stored else "live")
        report.run["status"] = status.value
        report.run["trace"] = str(self.path)
        report.run["judged"] = stored is not None
        self.polled_at = time.time()
        return report


class JobFollower:
    """Follow a job of several ranks: each poll reads every rank's stored or live judgement
    (``analysis.job.job_view``); ranks that appear later are picked up."""

    def __init__(self, run: RunFolder) -> None:
        self.run = run
        self.path = run.path
        self.polled_at = 0.0

    def close(self) -> None:
        pass

    def poll(self) -> Report:
        from torchleak.analysis.job import job_view

        self.run = run_folder(self.path) or self.run
        report = job_view(self.run)
        self.polled_at = time.time()
        return report


_SHOWN = ("main_uss", "main_rss", "workers_uss", "cuda_allocated", "cuda_reserved_unused",
          "tensors", "tensor_bytes", "graph_bytes")


def _findings(conn: sqlite3.Connection, phase: str) -> list[Finding]:
    found = []
    for _phase, _step, text in rows.findings(conn, phase):
        try:
            data = json.loads(text)
        except (ValueError, RecursionError, TypeError):
            continue
        report = Report.from_dict({"verdict": "leak", "steps": 0, "findings": [data]})
        if report is not None and report.findings:
            found.append(report.findings[0])
    return found
