"""Code from the field reports torchleak grew from: every leaky snippet is flagged, no
fixed one is.

The snippets are verbatim python blocks of those reports, under ``field_reports/``
(``leaky_<report>_<block>.py`` / ``fixed_<report>_<block>.py``).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from torchleak.check import check_source

HERE = Path(__file__).parent / "field_reports"
LEAKY = sorted(HERE.glob("leaky_*.py"))
FIXED = sorted(HERE.glob("fixed_*.py"))


def _findings(path: Path) -> list[str]:
    diags = check_source(path.read_text(encoding="utf-8"), path.name)
    return [f"{d.location} {d.code}" for d in diags if not d.code.startswith("TL0")]


@pytest.mark.parametrize("path", LEAKY, ids=lambda p: p.stem)
def test_leaky_snippet_is_flagged(path: Path) -> None:
    assert _findings(path), f"{path.name}: leaky snippet not flagged"


@pytest.mark.parametrize("path", FIXED, ids=lambda p: p.stem)
def test_fixed_snippet_is_clean(path: Path) -> None:
    assert _findings(path) == []


def test_there_are_snippets() -> None:
    assert len(LEAKY) >= 6 and len(FIXED) >= 15
