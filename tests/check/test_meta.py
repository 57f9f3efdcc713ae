"""Every code is unique, follows the policy, and is documented with bad/good examples."""

from __future__ import annotations

import re
from pathlib import Path

from torchleak.check import ALL_RULES, META_CODES

ROOT = Path(__file__).resolve().parents[2]
DOCS = (ROOT / "docs" / "check-rules.md").read_text(encoding="utf-8")
FIXTURES = Path(__file__).parent / "fixtures"


def _section(code: str) -> str:
    match = re.search(rf"^### {code}\n(.*?)(?=^### |^## |\Z)", DOCS, re.S | re.M)
    assert match, f"{code} has no '### {code}' section in docs/check-rules.md"
    return match.group(1)


def test_codes_unique_and_well_formed() -> None:
    codes = [r.code for r in ALL_RULES] + list(META_CODES)
    assert len(codes) == len(set(codes))
    assert all(re.fullmatch(r"TL[0-4]\d\d", c) for c in codes)
    names = [r.name for r in ALL_RULES]
    assert len(names) == len(set(names))


def test_noisy_rules_are_off_by_default() -> None:
    for rule in ALL_RULES:
        assert rule.default_on == (not rule.code.startswith("TL4"))


def test_every_rule_documents_itself() -> None:
    """The docstring has ruff's sections; the rules page is generated from it."""
    for rule in ALL_RULES:
        doc = type(rule).__doc__ or ""
        for heading in ("## What it does", "## Why is this bad?", "## Example",
                        "## Fix safety"):
            assert heading in doc, f"{rule.code}: no {heading!r} in its docstring"
        assert doc.count("```python") >= 2, f"{rule.code}: needs a bad and a good example"
        section = _section(rule.code)
        assert rule.name in section and "#### Fix safety" in section
        assert rule.fix_availability in ("always", "sometimes", "never")


def test_rules_page_is_generated_and_up_to_date() -> None:
    from torchleak.check.ruledocs import render_document

    assert DOCS == render_document(), ("docs/check-rules.md is stale: run "
                                       "`python -m torchleak.check.ruledocs --write "
                                       "docs/check-rules.md`")


def test_explain_prints_the_rule_docs() -> None:
    from torchleak.check.ruledocs import explain

    text = explain("TL101") or ""
    assert text.startswith("# tensor-accumulated-with-graph (TL101)")
    assert "## Why is this bad?" in text and "## Fix safety" in text
    assert explain("graph-tensor-stored") == explain("tl102")
    assert explain("TL999") is None


def test_meta_codes_documented() -> None:
    for code in META_CODES:
        _section(code)


def test_every_rule_has_a_fixture_and_golden() -> None:
    for rule in ALL_RULES:
        assert (FIXTURES / f"{rule.code}.py").is_file()
        assert (FIXTURES / f"{rule.code}.expected").is_file()


def test_messages_are_one_sentence_with_a_fix() -> None:
    for path in FIXTURES.glob("TL*.expected"):
        for line in path.read_text(encoding="utf-8").splitlines():
            message = line.split(": ", 1)[1]
            assert ";" in message, line  # "<what is wrong>; <what to do>"
            assert not message.rstrip().endswith(".")
