"""The Hugging Face callback on a real Trainer (a 2-layer GPT-2 from a random config):
the verdict and holder `torchleak run` gives, memory scalars in the Trainer's log and in
its TensorBoard integration, the guard through the control flags."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
from integrationkit import installed

sys.path.insert(0, str(Path(__file__).parent))
from frameworks import culprits, report_json, scalars, trace_rows  # noqa: E402

pytestmark = [pytest.mark.integrations,
              pytest.mark.skipif(not installed("transformers", "accelerate"),
                                 reason="needs transformers and accelerate: "
                                        "pip install transformers accelerate")]
HOLDER = "KeepingTrainer.step_tensors"


def test_leaky_trainer_subclass_is_named_like_under_torchleak_run(framework_runs) -> None:
    with_callback = framework_runs.get("hf_leak")
    under_run = framework_runs.get("hf_leak_run")
    assert with_callback.proc.returncode == 0, with_callback.output[-3000:]
    assert under_run.proc.returncode == 0, under_run.output[-3000:]
    report = report_json(with_callback.folder / "report.json")
    assert report["verdict"] == "leak"
    (culprit,) = culprits(report)
    assert culprit.startswith(HOLDER) and "(list of Tensor, +1 items/step)" in culprit
    # Word for word what `torchleak run` says about the same script.
    assert re.search(rf"\[(medium|high)\] {re.escape(culprit)}\n", under_run.proc.stderr)


def test_healthy_trainer_is_no_leak(framework_runs) -> None:
    run = framework_runs.get("hf_healthy")
    assert run.proc.returncode == 0, run.output[-3000:]
    report = report_json(run.folder / "report.json")
    assert report["verdict"] == "no_leak", report["reason"]


def test_memory_scalars_join_the_trainers_log_and_its_integrations(framework_runs) -> None:
    run = framework_runs.get("hf_leak")
    history = json.loads((run.folder / "history.json").read_text())
    logged = [entry for entry in history if "torchleak/main_uss_mib" in entry]
    assert len(logged) >= 10  # every logging step (logging_steps=4 over 48 steps) and the end
    assert all(50 < e["torchleak/main_uss_mib"] < 4096 for e in logged)
    assert history[-1]["torchleak/verdict_leak"] == 1.0  # the final verdict, at the end
    assert history[-1]["torchleak/serious_findings"] >= 1
    series = scalars(run.folder / "hf-out")  # the Trainer's TensorBoard integration
    assert len(series.get("train/torchleak/main_uss_mib", [])) >= 10, sorted(series)


def test_phase_marks_from_the_trainers_events(framework_runs) -> None:
    run = framework_runs.get("hf_healthy")
    marks = [name for (name,) in trace_rows(run.folder / "cb" / "trace.sqlite",
                                            "SELECT name FROM marks")]
    assert marks.count("epoch") == 1


def test_guard_saves_through_the_trainer_and_stops_it(framework_runs) -> None:
    run = framework_runs.get("hf_guard")
    assert run.proc.returncode == 0, run.output[-3000:]
    step = int(re.search(r"train done at step (\d+)", run.proc.stdout).group(1))
    assert step < 48  # stopped early, cleanly (exit code 0, the script's own end ran)
    assert list((run.folder / "hf-out").glob("checkpoint-*")), "no checkpoint saved"
    (guard,) = trace_rows(run.folder / "cb" / "trace.sqlite",
                          "SELECT value FROM meta WHERE key = 'guard'")
    assert json.loads(guard[0])["mode"] == "stop"
