"""The Report as JSON: the zoo's tool contract, with the run's metadata filled in."""

from __future__ import annotations

import json
from typing import Any

from torchleak.report import Report
from torchleak.views.model import RunView
from torchleak.views.renderers.base import Renderer

_RUN_KEYS = ("name", "script", "argv", "start_time", "end_time", "exit_code", "pid",
             "hostname", "python", "torch", "devices", "ram_total", "cgroup_limit", "gpu_totals")


class JsonRenderer(Renderer):
    extension = ".json"

    def render(self, view: RunView) -> str:
        report = view.report or Report(verdict="inconclusive", steps=view.state.steps,
                                       reason="no analysis available for this run")
        data = report.to_dict()
        data["steps"] = max(int(data.get("steps") or 0), view.state.steps)
        data["run"] = {**run_metadata(view), **dict(data.get("run") or {})}
        data["run"]["status"] = view.state.status
        data["findings_source"] = view.report_source
        data["peaks"] = {ln.line.name: ln.line.peak for ln in view.summaries()}
        return json.dumps(data, indent=2, default=str)


def run_metadata(view: RunView) -> dict[str, Any]:
    meta = view.state.meta
    run = {key: meta[key] for key in _RUN_KEYS if key in meta}
    run["trace"] = str(view.state.path)
    return run

