"""`torchleak diff`: a leaky run and its fixed twin, recorded from real CPU loops."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness import Recorded, record_loop
from loops import train_keeping_logits

from torchleak.analysis.diff import diff_reports
from torchleak.cli import main
from torchleak.views.diff import summary_line


@pytest.fixture(scope="module")
def twins(tmp_path_factory: pytest.TempPathFactory) -> tuple[Recorded, Recorded]:
    folder = tmp_path_factory.mktemp("twins")
    # Logits of 128 KiB a step kept, and the fixed twin (longer: lengths may differ). Both
    # run in this process, on one heap: the fixed twin first, so that memory the leaky run
    # freed and the allocator kept cannot raise the fixed twin's peak.
    fixed = record_loop(lambda: train_keeping_logits(300, 2048, keep=False), folder, "fixed",
                        "train.py")
    leaky = record_loop(lambda: train_keeping_logits(240, 2048), folder, "leaky", "train.py")
    return leaky, fixed


def test_diff_says_the_holder_went_away_and_the_slope_fell(
        twins: tuple[Recorded, Recorded]) -> None:
    leaky, fixed = twins
    assert leaky.report.verdict == "leak" and fixed.report.verdict == "no_leak", (
        leaky.explain(), fixed.explain())
    diff = diff_reports(leaky.report, fixed.report)
    assert [h.name for h in diff.gone] == ["epoch_logits"] and not diff.appeared
    # The slope fell: the measured process growth (when the heap had no free memory to
    # reuse) and the category that held the logits.
    main_uss = next(s for s in diff.signals if s.signal == "main_uss")
    assert main_uss.growth_b == 0.0 and main_uss.growth_a >= main_uss.growth_b
    other = next(c for c in diff.categories if c.category == "other_tensors")
    assert other.a_rate is not None and other.a_rate > 64 * 1024, leaky.explain()
    assert other.b_rate is not None and abs(other.b_rate) < 1024
    # B's peak is not above A's by more than the shared heap's noise: both twins run in
    # this process, whose free memory (from earlier tests) can absorb A's 30 MiB of growth
    # without raising A's peak, and whose collections (earlier tests' garbage) come when
    # they come; a fixed run that peaked a leak's worth higher would fail this.
    assert diff.peak_a is not None and diff.peak_delta is not None
    assert diff.peak_delta <= 0.01 * diff.peak_a
    line = summary_line(diff)
    assert line.startswith("`epoch_logits` gone;") and "main USS slope" in line
    assert not diff.worse and diff.reasons == []
    assert other.delta is not None and other.delta < 0


def test_fail_if_worse_exit_codes(twins: tuple[Recorded, Recorded], tmp_path: Path,
                                  capsys: pytest.CaptureFixture[str]) -> None:
    leaky, fixed = twins
    a, b = str(leaky.trace.parent), str(fixed.trace.parent)
    out = tmp_path / "diff.json"
    assert main(["diff", a, b, "--fail-if-worse", "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "holders that went away:\n  epoch_logits:" in text and "B is not worse" in text
    data = json.loads(out.read_text())
    assert data["worse"] is False and data["summary"].startswith("`epoch_logits` gone")
    assert main(["diff", b, a, "--fail-if-worse"]) == 3
    text = capsys.readouterr().out
    assert "B leaks where A did not" in text and "`epoch_logits` appeared" in text
    assert main(["diff", b, a]) == 0  # without --fail-if-worse a worse run is only reported
