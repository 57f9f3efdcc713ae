"""One renderer per format behind one small base (``Renderer.render(view) -> str``)."""

from __future__ import annotations

from torchleak.views.renderers.base import FORMATS, Renderer, get_renderer

__all__ = ["FORMATS", "Renderer", "get_renderer"]
