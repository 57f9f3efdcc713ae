"""Runtime findings cross-referenced with the static checker: when ``torchleak check``
flags the very line a finding points at, the finding says so (``[torchleak check:
TL102]``), so the user sees the rule that would have caught it before the run.

Every screen of a run's end says it the same way: ``torchleak run``'s summary, an
in-process monitor's and the framework callbacks' (``annotate`` is their
``MonitorOptions.annotate``), and ``torchleak report``. The checker stands alone: a
report is anything with findings that carry a ``source`` ("path:line: text").
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Protocol

TAG = "[torchleak check:"


class Sourced(Protocol):
    source: str | None


class WithFindings(Protocol):
    @property
    def findings(self) -> Sequence[Sourced]: ...


@lru_cache(maxsize=16)
def _codes(script: str) -> dict[int, str]:
    """line -> rule code of the static checker's findings in ``script``."""
    try:
        from torchleak.check import check_source

        text = Path(script).read_text(errors="replace")
        codes: dict[int, str] = {}
        for d in check_source(text, script):  # the first (most specific) code of a line
            if d.code.startswith("TL") and not d.code.startswith("TL0"):
                codes.setdefault(d.line, d.code)
        return codes
    except Exception:  # noqa: BLE001 - the cross-check must never break a report
        return {}


def annotate(report: WithFindings) -> None:
    """Add the checker's rule code to each finding whose source line it flags."""
    for finding in report.findings:
        source = finding.source or ""
        path, _, rest = source.partition(":")
        line = rest.split(":", 1)[0]
        if not (path and line.isdigit()) or TAG in source:
            continue
        code = _codes(path).get(int(line))
        if code:
            finding.source = f"{source}  {TAG} {code}]"
