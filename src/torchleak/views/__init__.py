"""The views of a recorded run: report (text/HTML/JSON), query, top and ls.

Everything here reads a trace read-only and draws it at view time; nothing runs during
training. Heavy dependencies (jinja2 for HTML, the analysis) are imported lazily.
"""

from __future__ import annotations

from torchleak.views.model import RunView, build_view
from torchleak.views.renderers import FORMATS, Renderer, get_renderer
from torchleak.views.source import RunState, open_trace, run_status

__all__ = [
    "FORMATS",
    "Renderer",
    "RunState",
    "RunView",
    "build_view",
    "get_renderer",
    "open_trace",
    "render",
    "run_status",
]


def render(run: str, fmt: str = "text", **options: object) -> str:
    """Render ``run`` (a run folder or trace file) in ``fmt``: 'text', 'html' or 'json'."""
    renderer = get_renderer(fmt, **options)
    return renderer.render(build_view(run))
