"""Where the memory goes, as each screen draws it: the text table, the stacked SVG chart
(no script, values on hover), the JSON points; and torchleak's own cost in ls."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from torchleak.analysis import analyze
from torchleak.cli import main
from torchleak.trace.writer import TraceWriter
from torchleak.views import get_renderer

from .synthetic import MIB, make_trace

CENSUSES = (10, 20, 30, 40, 50, 60)


def _with_breakdown(folder: Path) -> Path:
    path = make_trace(folder, steps=60, leak=True, report=False)
    writer = TraceWriter(path, claim=False)
    for step in CENSUSES:
        split = {"parameters": 4 * MIB, "gradients": 4 * MIB, "optimizer_state": 8 * MIB,
                 "other_tensors": step * 256 * 1024, "python_objects": 150 * MIB,
                 "allocator_slack": -1024 if step == 30 else 6 * MIB, "workers": 41 * MIB}
        split["total"] = sum(split.values())
        for name, value in split.items():
            writer.add("breakdown", (step, name, value))
    writer.add("breakdown", (30, "other_tensors", 30 * 256 * 1024))  # a second census
    writer.flush()
    writer.close()
    return path


@pytest.fixture
def report(tmp_path: Path):  # type: ignore[no-untyped-def]
    return analyze(_with_breakdown(tmp_path / "run"))


def test_report_json_has_points_rates_and_the_finding_category(report) -> None:  # type: ignore[no-untyped-def]
    data = json.loads(report.to_json())
    assert [p[0] for p in data["breakdown"]["other_tensors"]] == list(CENSUSES)
    assert list(data["breakdown"])[:3] == ["parameters", "gradients", "optimizer_state"]
    assert "total" in data["breakdown"] and "cuda_cache" not in data["breakdown"]
    assert data["breakdown_rates"]["other_tensors"] == pytest.approx(256 * 1024)
    assert data["breakdown_rates"]["parameters"] == 0
    losses = next(f for f in data["findings"] if f["holder_path"] == "Trainer.losses")
    assert losses["category"] == "other_tensors"


def test_text_table_lists_every_category(report) -> None:  # type: ignore[no-untyped-def]
    text = get_renderer("text", width=110).render(report)
    assert "where the memory goes" in text
    row = next(line for line in text.splitlines() if line.startswith("other_tensors"))
    assert "2.5 MiB at step 10" in row and "15 MiB at step 60" in row and "+256 KiB/step" in row


def test_html_stacked_chart_hovers_without_script(report) -> None:  # type: ignore[no-untyped-def]
    html = get_renderer("html").render(report)
    section = html[html.index('<section id="breakdown">'):html.index('<section id="signals">')]
    assert "<script" not in html.lower()
    assert section.count('<svg class="stacked"') == 1
    assert "<title>other_tensors: 15 MiB measured at step 60</title>" in section
    # A negative slack is drawn at zero height and says its value.
    slack = re.search(r'height="([0-9.]+)" fill="#94a3b8"><title>allocator_slack: -1 KiB', section)
    assert slack is not None and float(slack.group(1)) == 0.0
    assert "non-tensor heap" in section


def test_ls_shows_torchleak_cost(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    make_trace(tmp_path / "runs" / "one", steps=60, leak=False)
    assert main(["ls", "--runs-dir", str(tmp_path / "runs")]) == 0
    out = capsys.readouterr().out
    assert "torchleak's cost" in out.splitlines()[0]
    assert main(["ls", "--runs-dir", str(tmp_path / "runs"), "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data[0]["overhead"]["ms_per_step"] == pytest.approx(0.05)
