"""Hand-written training code in many styles: every leak is found with exactly the codes
its first line names (``# expect: TL102``), and no clean file gets a finding."""

from __future__ import annotations

from pathlib import Path

import pytest

from torchleak.check import check_source

CORPUS = Path(__file__).parent / "corpus"
LEAKS = sorted((CORPUS / "leaks").glob("*.py"))
CLEAN = sorted((CORPUS / "clean").glob("*.py"))


def _codes(path: Path) -> list[str]:
    return sorted({d.code for d in check_source(path.read_text(encoding="utf-8"), path.name)})


@pytest.mark.parametrize("path", LEAKS, ids=lambda p: p.stem)
def test_leak_is_found_with_its_codes(path: Path) -> None:
    first = path.read_text(encoding="utf-8").splitlines()[0]
    assert first.startswith("# expect: "), f"{path.name}: first line must name the codes"
    assert _codes(path) == sorted(first.removeprefix("# expect: ").split())


@pytest.mark.parametrize("path", CLEAN, ids=lambda p: p.stem)
def test_clean_code_has_no_finding(path: Path) -> None:
    assert _codes(path) == []


def test_corpus_covers_every_default_rule() -> None:
    from torchleak.check import ALL_RULES

    expected = {c for p in LEAKS
                for c in p.read_text(encoding="utf-8").splitlines()[0].split()[2:]}
    assert {r.code for r in ALL_RULES if r.default_on} <= expected
    assert len(LEAKS) >= 30 and len(CLEAN) >= 20
