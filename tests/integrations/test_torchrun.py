"""torchrun --nproc_per_node=2 -m torchleak run --out DIR: one run, one trace per rank,
rank 0 alone speaks for every rank, and `report` says which rank leaks."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integrations


def torchleak(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "torchleak", *args], text=True,
                          capture_output=True, timeout=120)


def test_one_run_folder_with_a_trace_per_rank(framework_runs) -> None:
    run = framework_runs.get("torchrun")
    assert run.proc.returncode == 0, run.output[-3000:]  # the script's own exit code
    launch = run.folder / "launch"
    assert sorted(p.parent.name for p in launch.glob("rank*/trace.sqlite")) == ["rank0", "rank1"]
    assert not (launch / "trace.sqlite").exists()


def test_rank_0_alone_prints_one_summary_for_both_ranks(framework_runs) -> None:
    err = framework_runs.get("torchrun").proc.stderr
    assert err.count("torchleak: recording") == 1 and err.count("torchleak: LEAK after") == 1
    assert re.search(r"rank 1 grows \+[\d.]+ KiB/step; rank 0 flat", err)
    assert "rank 0: no leak after 60 steps" in err
    assert "rank 1: LEAK after 60 steps: local kept in main()" in err
    assert "traces of 2 ranks in launch" in err


def test_report_covers_every_rank(framework_runs) -> None:
    launch = framework_runs.get("torchrun").folder / "launch"
    text = torchleak("report", str(launch))
    assert text.returncode == 0, text.stderr
    assert re.search(r"^0\s+\| no_leak\s+\| 60\s+\| flat", text.stdout, re.M)
    assert re.search(r"^1\s+\| leak\s+\| 60\s+\| \+[\d.]+ KiB/step \| local kept in main\(\)",
                     text.stdout, re.M)
    assert "rank 1: local kept in main()" in text.stdout  # rank 1's finding, with its fix
    data = json.loads(torchleak("report", str(launch), "--format", "json").stdout)
    assert data["verdict"] == "leak"
    assert [(r["rank"], r["verdict"]) for r in data["ranks"]] == [(0, "no_leak"), (1, "leak")]
    assert {s["name"] for s in data["signals"]} >= {"rank0_main_uss", "rank1_main_uss"}
    html = torchleak("report", str(launch), "-o", str(launch / "report.html"))
    assert html.returncode == 0
    page = (launch / "report.html").read_text()
    assert 'id="ranks"' in page and "main USS per rank" in page


def test_ls_shows_one_run_with_two_ranks(framework_runs, tmp_path: Path) -> None:
    launch = framework_runs.get("torchrun").folder / "launch"
    listing = torchleak("ls", "--runs-dir", str(launch.parent), "--format", "json")
    runs = json.loads(listing.stdout)
    (ours,) = [r for r in runs if Path(r["path"]).name == "launch"]
    assert ours["ranks"] == 2 and ours["verdict"].startswith("leak")
