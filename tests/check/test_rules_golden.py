"""One fixture per rule (``# Not OK`` then ``# OK``) against a golden expected output.

Regenerate the goldens after an intended change with ``TORCHLEAK_UPDATE_GOLDEN=1``.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from torchleak.check import ALL_RULES, check_source

FIXTURES = Path(__file__).parent / "fixtures"
CODES = [rule.code for rule in ALL_RULES]


def _render(code: str) -> str:
    path = FIXTURES / f"{code}.py"
    diags = check_source(path.read_text(encoding="utf-8"), f"{code}.py", select=[code])
    return "".join(f"{d.location}: {d.code} {d.message}\n" for d in diags)


@pytest.mark.parametrize("code", CODES)
def test_fixture_matches_golden(code: str) -> None:
    golden = FIXTURES / f"{code}.expected"
    actual = _render(code)
    if os.environ.get("TORCHLEAK_UPDATE_GOLDEN"):
        golden.write_text(actual, encoding="utf-8")
    assert actual == golden.read_text(encoding="utf-8")


@pytest.mark.parametrize("code", CODES)
def test_not_ok_section_flagged_ok_section_clean(code: str) -> None:
    source = (FIXTURES / f"{code}.py").read_text(encoding="utf-8")
    lines = source.splitlines()
    not_ok = lines.index("# Not OK") + 1
    ok = lines.index("# OK") + 1
    diags = check_source(source, f"{code}.py", select=["ALL"])
    own = [d for d in diags if d.code == code]
    assert own, f"{code}: nothing flagged in the Not OK section"
    assert all(not_ok < d.line < ok for d in own), [d.location for d in own]
    assert not [d for d in diags if d.code.startswith("TL0")], "fixture must parse cleanly"


@pytest.mark.parametrize("code", CODES)
def test_ok_section_clean_for_every_rule(code: str) -> None:
    """The OK section of a fixture is clean for *all* rules, not only its own."""
    source = (FIXTURES / f"{code}.py").read_text(encoding="utf-8")
    ok = source.splitlines().index("# OK") + 1
    diags = check_source(source, f"{code}.py", select=["TL1", "TL2", "TL3"])
    assert [d.location + " " + d.code for d in diags if d.line > ok] == []
