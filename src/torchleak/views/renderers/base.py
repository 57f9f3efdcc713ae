"""The renderer contract and the format registry (renderers import lazily: HTML needs jinja2)."""

from __future__ import annotations

import importlib
from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any

from torchleak.errors import UsageError

if TYPE_CHECKING:
    from torchleak.report import Report

FORMATS: dict[str, str] = {
    "text": "torchleak.views.renderers.text:TextRenderer",
    "html": "torchleak.views.renderers.html:HtmlRenderer",
    "json": "torchleak.views.renderers.json:JsonRenderer",
}


class Renderer(ABC):
    """Turns a ``Report`` into the text of one output format."""

    extension: str = ".txt"

    @abstractmethod
    def render(self, report: Report) -> str:
        """The whole document; callers decide where it goes."""


def get_renderer(fmt: str, **options: Any) -> Renderer:
    try:
        module_name, class_name = FORMATS[fmt].split(":")
    except KeyError:
        raise UsageError(f"unknown format {fmt!r}: choose one of {', '.join(FORMATS)}") from None
    cls = getattr(importlib.import_module(module_name), class_name)
    return cls(**options)
