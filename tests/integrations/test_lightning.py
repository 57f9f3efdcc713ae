"""The Lightning callback on a real Trainer: the verdict and holder `torchleak run` gives,
phase marks from the trainer's hooks, the memory series in the trainer's logger, DDP."""

from __future__ import annotations

import csv
import re
import sys
from pathlib import Path

import pytest
from integrationkit import installed

sys.path.insert(0, str(Path(__file__).parent))
from frameworks import csv_column, culprits, report_json, trace_rows  # noqa: E402

pytestmark = [pytest.mark.integrations,
              pytest.mark.skipif(not installed("lightning"),
                                 reason="needs lightning: pip install lightning")]
HOLDER = "LitModel.training_step_outputs"


def test_leaky_run_names_the_modules_list_like_torchleak_run(framework_runs) -> None:
    with_callback = framework_runs.get("lightning_leak")
    under_run = framework_runs.get("lightning_leak_run")
    assert with_callback.proc.returncode == 0, with_callback.output[-3000:]
    assert under_run.proc.returncode == 0, under_run.output[-3000:]
    report = report_json(with_callback.folder / "report.json")
    assert report["verdict"] == "leak"
    (culprit,) = culprits(report)
    # Named from the LightningModule, not through the Trainer's internals.
    assert culprit == f"{HOLDER} (list of Tensor, +1 items/step)"
    # The same verdict and holder, word for word, under `torchleak run`.
    assert "LEAK after" in under_run.proc.stderr
    assert re.search(rf"\[(medium|high)\] {re.escape(culprit)}\n", under_run.proc.stderr)
    # The callback's own summary on stderr.
    assert re.search(rf"\[(medium|high)\] {re.escape(HOLDER)} \(list", with_callback.proc.stderr)


def test_healthy_run_is_no_leak(framework_runs) -> None:
    run = framework_runs.get("lightning_healthy")
    assert run.proc.returncode == 0, run.output[-3000:]
    report = report_json(run.folder / "report.json")
    assert report["verdict"] == "no_leak", report["reason"]
    assert "torchleak: no leak after" in run.proc.stderr


def test_phase_marks_come_from_the_trainers_hooks(framework_runs) -> None:
    run = framework_runs.get("lightning_healthy")
    marks = [name for (name,) in trace_rows(run.folder / "cb" / "trace.sqlite",
                                            "SELECT name FROM marks ORDER BY rowid")]
    assert marks.count("epoch") == 2
    assert marks.count("validation_start") >= 2 and "validation_end" in marks


def test_the_loggers_receive_the_memory_series_and_the_verdict(framework_runs) -> None:
    for name, leak in (("lightning_leak", 1.0), ("lightning_healthy", 0.0)):
        run = framework_runs.get(name)
        metrics = next((run.folder / "logs").rglob("metrics.csv"))
        uss = csv_column(metrics, "torchleak/main_uss_mib")
        steps = report_json(run.folder / "report.json")["steps"]
        assert len(uss) >= steps - 1 and all(50 < v < 4096 for v in uss)  # one a step, in MiB
        assert len(csv_column(metrics, "torchleak/main_rss_mib")) == len(uss)
        assert csv_column(metrics, "torchleak/verdict_leak") == [leak]
        assert csv_column(metrics, "torchleak/serious_findings") == [leak]


def test_a_leak_is_logged_only_once_the_live_detector_calls_it(framework_runs) -> None:
    # What the logger gets says what the live detector prints: a growth it only suspects
    # is no logged leak.
    run = framework_runs.get("lightning_leak")
    metrics = next((run.folder / "logs").rglob("metrics.csv"))
    with metrics.open() as handle:
        logged = [(int(row["step"]), float(row["torchleak/leaks"]))
                  for row in csv.DictReader(handle) if row.get("torchleak/leaks")]
    assert logged, "no leak count logged"
    # No live pass at all (a run of a fraction of a second in-process): no call either.
    calls = (report_json(run.folder / "report.json")["live"] or {}).get("calls", [])
    first_call = min((call["step"] for call in calls), default=None)
    counted = [step for step, leaks in logged if leaks > 0]
    if first_call is None:
        assert counted == []
    else:  # the trainer's global step is the step before ours at the batch's end
        assert counted and min(counted) >= first_call - 1, (first_call, logged)


def test_ddp_ranks_share_one_run_and_rank_0_speaks_for_both(framework_runs) -> None:
    run = framework_runs.get("lightning_ddp")
    assert run.proc.returncode == 0, run.output[-3000:]
    folders = [p for p in (run.folder / "runs").iterdir() if p.is_dir()]
    assert len(folders) == 1, folders  # both ranks in one folder, named once by rank 0
    assert sorted(p.parent.name for p in folders[0].glob("rank*/trace.sqlite")) == ["rank0", "rank1"]
    assert run.proc.stderr.count("torchleak: LEAK after") == 1  # rank 0 alone prints
    assert re.search(r"rank 1 grows .*/step; rank 0 flat", run.proc.stderr)
    assert "rank 1: RankModel.kept" in run.proc.stderr


def test_guard_saves_a_checkpoint_and_stops_the_trainer(framework_runs) -> None:
    run = framework_runs.get("lightning_guard")
    assert run.proc.returncode == 0, run.output[-3000:]
    step = int(re.search(r"fit done at step (\d+)", run.proc.stdout).group(1))
    assert step < 60  # should_stop ended fit early; the script went on to its end
    saved = list(run.folder.rglob("torchleak-guard-step*.ckpt"))
    assert saved, "no guard checkpoint"
    import torch

    assert "state_dict" in torch.load(saved[0], weights_only=False)
