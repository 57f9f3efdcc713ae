"""A finding whose holder keeps nothing of its own beside the others on its signal (a
tensor sum whose graph holds the outputs a list already keeps) gets no share of the
measured growth, says so, and names the holders whose shares count what it keeps."""

from __future__ import annotations

import pytest

from torchleak.analysis import rates
from torchleak.analysis.holders import HolderFinding
from torchleak.analysis.series import RunData
from torchleak.report import Finding
from torchleak.views.renderers.details import rate_text
from torchleak.vocab import FindingKind, Severity, Signal

MEASURED = 12_000.0  # bytes/step the signal grows while the holders grow


def _holder(path: str, own: float) -> HolderFinding:
    finding = Finding(kind=FindingKind.CONTAINER.value, culprit=path,
                      severity=Severity.MEDIUM.value, fix="", signal=Signal.MAIN_USS.value,
                      holder_bytes_per_step=own, holder_path=path)
    return HolderFinding(finding=finding, onset=10.0, holder=None)  # type: ignore[arg-type]


def test_a_holder_with_nothing_of_its_own_gets_no_share_and_says_where_it_is_counted(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(rates, "measured_slope", lambda *args: MEASURED)
    outputs, total = _holder("train.outputs", 8_000.0), _holder("train.total", 0.0)
    rates.assign_rates(RunData(), {}, [outputs, total], [])
    assert outputs.finding.bytes_per_step == MEASURED
    assert outputs.finding.rate_basis == "measured"
    assert total.finding.bytes_per_step == 0 and total.finding.rate_basis == "shared"
    assert any("also kept by train.outputs" in line for line in total.finding.evidence)
    assert "of its own (what it keeps is counted under" in rate_text(total.finding)
    assert "(measured: " in rate_text(outputs.finding)
