"""A job of many ranks: one summary sized by its leaking ranks, however many leak."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from torchleak.analysis.runs import compress_ranks
from torchleak.cli import main

from .synthetic import make_trace


def test_rank_lists_are_ranges_and_stay_short() -> None:
    assert compress_ranks([7, 0, 2, 3, 4]) == "0, 2-4, 7"
    assert compress_ranks([5]) == "5" and compress_ranks([]) == ""
    every_other = compress_ranks(list(range(0, 2000, 2)), limit=40)
    assert len(every_other) < 60 and every_other.endswith("more)")
    shown = every_other.split(", ... (")[0].split(", ")
    assert every_other.endswith(f"({1000 - len(shown)} more)")


@pytest.fixture(scope="module")
def many_leak(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """24 ranks, 21 of them leaking through the same holder (the same code on every rank)."""
    job = tmp_path_factory.mktemp("job") / "job"
    for rank in range(24):
        make_trace(job / f"rank{rank}", leak=rank not in (0, 5, 9), cuda=False, name="job")
    return job


def test_many_leaking_ranks_share_one_finding_and_a_bounded_table(
        many_leak: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", str(many_leak), "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    leaking = [r for r in range(24) if r not in (0, 5, 9)]
    assert sorted(line["rank"] for line in data["ranks"]) == leaking
    assert data["job"]["flat"] == "0, 5, 9" and data["job"]["verdicts"]["leak"] == 21
    serious = [f for f in data["findings"] if f["severity"] != "low"]
    assert len(serious) == len({(f["kind"], f["holder_path"]) for f in serious})  # grouped
    assert serious[0]["culprit"].startswith("ranks 1-4, 6-8, 10-23: ")
    assert main(["report", str(many_leak)]) == 0
    text = capsys.readouterr().out
    assert len(text.splitlines()) < 100
    assert "1 more leaking ranks: " in text  # 21 leaking, 20 rows
    assert "ranks 0, 5, 9 flat" in text


def test_the_end_of_run_summary_names_a_few_leaking_ranks(many_leak: Path) -> None:
    from torchleak.analysis.job import run_report
    from torchleak.trace.catalog import run_folder
    from torchleak.views.summary import format_summary

    run = run_folder(many_leak)
    assert run is not None
    text = format_summary(run_report(run), run.traces[0])
    assert text.count("LEAK after") == 1 + 8  # the headline and 8 ranks
    assert "... and 13 more leaking ranks in the report" in text
    assert "traces of 24 ranks in" in text
