"""Rule documentation from each rule's own docstring: ``torchleak check --explain CODE``,
SARIF help, and ``docs/check-rules.md``.

    python -m torchleak.check.ruledocs --write docs/check-rules.md
"""

from __future__ import annotations

import argparse
import inspect
from importlib import resources

from torchleak.check.rules import ALL_RULES, META_CODES, Rule


def find_rule(code_or_name: str) -> Rule | None:
    key = code_or_name.strip()
    return next((r for r in ALL_RULES if key.upper() == r.code or key == r.name), None)


def rule_markdown(rule: Rule) -> str:
    """The rule's docstring: what it does, why it is bad, example, fix safety."""
    return inspect.cleandoc(type(rule).__doc__ or rule.summary)


def _fix_line(rule: Rule) -> str:
    return {"always": "A fix is always available.", "sometimes": "A fix is sometimes available.",
            "never": "No fix is available."}[rule.fix_availability]


def explain(code_or_name: str) -> str | None:
    rule = find_rule(code_or_name)
    if rule is None:
        meta = META_CODES.get(code_or_name.strip().upper())
        return f"# {code_or_name.strip().upper()}\n\n{meta}" if meta else None
    state = "on by default" if rule.default_on else "off by default (select it to use it)"
    return (f"# {rule.name} ({rule.code})\n\n{rule.summary}\n\n{_fix_line(rule)} "
            f"The rule is {state}.\n\n{rule_markdown(rule)}")


def _section(rule: Rule) -> str:
    body = rule_markdown(rule).replace("\n## ", "\n#### ")
    if body.startswith("## "):
        body = "#### " + body[3:]
    state = "" if rule.default_on else " Off by default."
    return (f"### {rule.code}\n\n**{rule.name}**: {rule.summary} {_fix_line(rule)}"
            f"{state}\n\n{body}\n")


def _meta_sections() -> str:
    return "\n".join(f"### {code}\n\n{text}.\n" for code, text in META_CODES.items())


def render_document() -> str:
    """The whole of ``docs/check-rules.md``."""
    package = resources.files("torchleak.check")
    intro = package.joinpath("docs_intro.md").read_text(encoding="utf-8")
    outro = package.joinpath("docs_outro.md").read_text(encoding="utf-8")
    groups = [("Definite leaks (TL1xx)", "TL1"), ("Likely leaks (TL2xx)", "TL2"),
              ("Memory waste (TL3xx)", "TL3"), ("Noisy, off by default (TL4xx)", "TL4")]
    parts = [intro.rstrip() + "\n", "## Checker diagnostics (TL0xx)\n", _meta_sections()]
    for title, prefix in groups:
        parts.append(f"## {title}\n")
        parts += [_section(r) for r in ALL_RULES if r.code.startswith(prefix)]
    parts.append(outro.rstrip() + "\n")
    return "\n".join(parts)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Generate docs/check-rules.md.")
    parser.add_argument("--write", metavar="PATH", help="write the document here")
    args = parser.parse_args(argv)
    text = render_document()
    if args.write:
        with open(args.write, "w", encoding="utf-8", newline="\n") as fh:
            fh.write(text)
    else:
        print(text, end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
