"""`torchleak report RUN --format tensorboard -o DIR`: a recorded run's series and
findings as TensorBoard event files."""

from __future__ import annotations

import sys
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
    # USS is read at as many of the 60 steps as the run's budget allows (fewer in a young
    # process): each reading is one point.
    assert len(uss) >= 20 and all(50 < v < 4096 for _, v in uss)
    assert [s for s, _ in uss] == sorted({s for s, _ in uss})
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
