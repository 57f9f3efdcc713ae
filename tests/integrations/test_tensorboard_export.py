"""`torchleak report RUN --format tensorboard -o DIR`: a recorded run's series and
findings as TensorBoard event files."""

from __future__ import annotations

import sqlite3
import sys
from contextlib import closing
from pathlib import Path

import pytest
import torch
from integrationkit import installed

import torchleak
from torchleak.cli import main

sys.path.insert(0, str(Path(__file__).parent))
from frameworks import loop, scalars  # noqa: E402

pytestmark = [pytest.mark.integrations,
              pytest.mark.skipif(not installed("tensorboard"),
                                 reason="needs tensorboard: pip install tensorboard")]


@pytest.fixture(scope="module")
def leaky_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("tb") / "run"
    history: list[torch.Tensor] = []
    with torchleak.monitor(out=str(folder), quiet=True):
        loop(60, history)
    return folder


def test_series_and_findings_exported(leaky_run: Path, tmp_path: Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "tb"
    assert main(["report", str(leaky_run), "--format", "tensorboard", "-o", str(out)]) == 0
    assert "tensorboard --logdir" in capsys.readouterr().err
    series = scalars(out)
    uss = series["torchleak/main_uss_mib"]
    # How many of the 60 steps read USS depends on how fast the steps are (at most one
    # read a millisecond, and one at every step that runs a probe): each reading the trace
    # holds is one point, at its step and in MiB, and the first two steps always read.
    with closing(sqlite3.connect(leaky_run / "trace.sqlite")) as conn:
        readings = conn.execute("SELECT step, uss FROM steps WHERE uss IS NOT NULL "
                                "ORDER BY step").fetchall()
    assert uss == [(step, pytest.approx(value / 2**20)) for step, value in readings]
    assert [step for step, _ in readings[:2]] == [1, 2]
    assert all(50 < v < 4096 for _, v in uss)
    assert any(tag.startswith("torchleak/holders/") and "keep" in tag for tag in series)
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(out))
    events.Reload()
    assert {"torchleak/verdict/text_summary", "torchleak/findings/text_summary"} <= set(
        events.Tags()["tensors"])


def test_tensorboard_needs_a_folder(leaky_run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", str(leaky_run), "--format", "tensorboard"]) == 64
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "pass -o DIR" in err
