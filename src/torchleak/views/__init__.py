"""The views: everything torchleak shows a person, drawn from a ``Report`` (or, for
``top`` and ``ls``, from the live and run summaries the analysis builds). Views never
open a trace and never compute a number of their own.
"""

from __future__ import annotations

from torchleak.views.renderers import FORMATS, Renderer, get_renderer

__all__ = ["FORMATS", "Renderer", "get_renderer"]
