"""The Report as JSON: every number exactly as the other screens show it, in full."""

from __future__ import annotations

from torchleak.report import Report
from torchleak.views.renderers.base import Renderer


class JsonRenderer(Renderer):
    extension = ".json"

    def render(self, report: Report) -> str:
        return report.to_json(indent=2) + "\n"
