"""The online detector: the same analysis, run during training on what is recorded so far.

It runs on the trace writer's thread after a flush, reading the trace through its own
read-only connection, never on the training thread. Its cadence adapts so it uses at
most ~0.3% of one core: after an analysis that took ``c`` seconds it waits
``max(MIN_INTERVAL, c / SHARE)``. It publishes the live verdict in ``meta['live']`` (for
``torchleak top``) and a ``detection`` event the first time each finding fires.
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path
from typing import Any

from torchleak.analysis.series import load
from torchleak.analysis.verdict import build_report

MIN_INTERVAL = 2.0
SHARE = 0.003


def finding_key(finding: Any) -> str:
    return f"{finding.kind}:{finding.holder_path or finding.signal}"


class OnlineDetector:
    def __init__(self, trace: Path, publish: Any, event: Any) -> None:
        self._trace = trace
        self._publish = publish  # (key, value) -> None: meta writer
        self._event = event  # (kind, source, message) -> None
        self._conn: sqlite3.Connection | None = None
        self._next = 0.0
        self.first_fired: dict[str, int] = {}
        self.failed: str | None = None

    def maybe_run(self) -> None:
        if self.failed or time.monotonic() < self._next:
            return
        start = time.monotonic()
        try:
            self._run()
        except Exception as err:  # noqa: BLE001 - switched off, recorded, never raised
            self.failed = f"{type(err).__name__}: {err}"
            self._event("probe_disabled", "online_detector", self.failed)
        cost = time.monotonic() - start
        self._next = time.monotonic() + max(MIN_INTERVAL, cost / SHARE)

    def _run(self) -> None:
        if self._conn is None:
            self._conn = sqlite3.connect(f"file:{self._trace}?mode=ro", uri=True,
                                         check_same_thread=False)
        data = load(self._conn)
        if data.steps == 0:
            return
        report = build_report(data, replay=False)
        for finding in report.findings:
            key = finding_key(finding)
            if finding.severity in ("high", "medium") and key not in self.first_fired:
                self.first_fired[key] = data.steps
                self._event("detection", "online_detector", f"step {data.steps}: {finding.culprit}")
        self._publish("live", {"step": data.steps, "verdict": report.verdict,
                               "findings": [f.culprit for f in report.findings[:5]]})

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
