"""`torchleak report`: text, JSON and HTML drawn from one Report, agreeing on every number."""

from __future__ import annotations

import json
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from torchleak.analysis.job import run_report
from torchleak.cli import main
from torchleak.trace.catalog import run_folder
from torchleak.trace.judgements import judgement_row
from torchleak.trace.writer import TraceWriter
from torchleak.units import format_bytes
from torchleak.views import get_renderer

from .synthetic import LEAK_PER_STEP, LiveWriter, folder_fingerprint, make_trace

URL = re.compile(r"(https?:|ftp:|//[a-z0-9.-]+\.[a-z]{2,}|url\(|@import|<link|src=)", re.I)


def _report(path: Path):  # type: ignore[no-untyped-def]
    found = run_folder(path)
    assert found is not None
    return run_report(found)


def render(path: Path, fmt: str, **options: object) -> str:
    return get_renderer(fmt, **options).render(_report(path))


def test_text_report_has_verdict_sparklines_and_findings(leak_run: Path) -> None:
    text = render(leak_run, "text", width=110)
    assert "Memory leak: 1 finding" in text
    assert "Trainer.losses" in text and "+256 KiB/step (measured: main process USS)" in text
    assert "cgroup memory.max 280 MiB" in text and "docs/patterns.md#" in text
    for label in ("main USS", "workers USS", "CUDA allocated", "tensor bytes", "graph bytes"):
        assert label in text
    assert "▁" in text and "█" in text  # sparklines


def test_text_report_never_cuts_a_value_when_piped(leak_run: Path, tmp_path: Path) -> None:
    """`torchleak report RUN | cat`: every value in full, whatever the length."""
    out = subprocess.run([sys.executable, "-m", "torchleak", "report", str(leak_run)],
                         capture_output=True, text=True, check=True)
    assert "…" not in out.stdout and "..." not in out.stdout
    report = _report(leak_run)
    for finding in report.findings:
        assert finding.fix in out.stdout and finding.culprit in out.stdout


def test_every_screen_prints_the_same_rate(leak_run: Path, capsys: pytest.CaptureFixture[str]
                                           ) -> None:
    report = _report(leak_run)
    rate = format_bytes(report.findings[0].bytes_per_step, signed=True) + "/step"
    assert rate == "+256 KiB/step"
    assert main(["report", str(leak_run), "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["findings"][0]["bytes_per_step"] == report.findings[0].bytes_per_step
    assert rate in render(leak_run, "text") and rate in render(leak_run, "html")
    assert main(["top", str(leak_run), "--once"]) == 0
    assert rate in capsys.readouterr().out


def test_text_report_without_findings(clean_run: Path) -> None:
    text = render(clean_run, "text", width=110)
    assert "No leak found" in text and "main USS" in text and "flat" in text


def test_json_report_is_the_report(leak_run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", str(leak_run), "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["verdict"] == "leak" and data["steps"] == 60
    finding = data["findings"][0]
    assert finding["culprit"].startswith("Trainer.losses")
    oom = finding["oom"]
    assert oom["limit_bytes"] == 280 * 1024 * 1024 and oom["steps_to_oom"] > 0
    assert oom["seconds_to_oom"] == pytest.approx(oom["steps_to_oom"] * 0.1, rel=0.01)
    assert data["run"]["status"] == "finished" and data["run"]["script"] == "train.py"
    assert data["overhead"]["ms_per_step"] == pytest.approx(0.05)


def test_html_report_is_self_contained(leak_run: Path, tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    assert main(["report", str(leak_run), "-o", str(out)]) == 0
    html = out.read_text()
    assert not URL.search(html), URL.search(html)
    assert "<script" not in html
    for chart in ("chart-main", "chart-workers", "chart-cuda0", "chart-tensors", "chart-graph"):
        assert f'id="{chart}"' in html
    assert html.count('<svg class="chart"') >= 5
    assert 'class="trend"' in html and "fitted line +256 KiB/step" in html
    assert 'class="oom"' in html and "projected OOM at step ~" in html
    assert 'class="epoch"' in html and 'class="validation"' in html
    assert 'class="card finding sev-high"' in html and "Trainer.losses" in html
    assert "<title>main USS: " in html  # hover values without a script


def test_a_fitted_line_is_drawn_only_on_its_own_series(leak_run: Path) -> None:
    """The main USS chart carries main USS's fit; a chart of unfitted series carries none."""
    html = render(leak_run, "html")
    charts = dict(re.findall(r'id="chart-([^"]+)".*?(<svg.*?</svg>)', html, re.S))
    assert 'class="trend"' in charts["main"]
    assert 'class="trend"' not in charts["workers"]  # flat: no line of its own, none borrowed
    report = _report(leak_run)
    fitted = [s for s in report.signals if s.fit is not None]
    assert fitted and all(s.verdict == "growing" for s in fitted)
    for signal in fitted:
        assert signal.fit is not None
        assert signal.fit.first_step >= min(signal.steps)
        assert signal.fit.last_step <= max(signal.steps)


def test_html_report_without_findings(clean_run: Path) -> None:
    html = render(clean_run, "html")
    assert "No findings" in html and 'id="chart-main"' in html and "verdict-no_leak" in html
    assert 'class="trend"' not in html  # flat signals get no fitted line


def test_long_traces_are_downsampled(tmp_path: Path) -> None:
    path = make_trace(tmp_path / "long", steps=6000, cuda=False)
    html = render(path.parent, "html")
    longest = max(len(m.split()) for m in re.findall(r'points="([^"]*)"', html))
    assert longest <= 2000


def test_running_run_is_analysed_as_it_stands(tmp_path: Path) -> None:
    path = make_trace(tmp_path / "live", status="running")
    writer = LiveWriter(path.parent)
    try:
        report = _report(path.parent)
        text = render(path.parent, "text", width=110)
    finally:
        writer.release()
    assert report.run["status"] == "running" and report.source == "live"
    assert report.findings and report.findings[0].culprit.startswith("Trainer.losses")
    assert "Run in progress: as of step 60" in text


def test_killed_run_is_analysed_from_its_trace(tmp_path: Path) -> None:
    path = make_trace(tmp_path / "killed", status="running", pid=2**22 + 12345)
    report = _report(path.parent)
    assert report.run["status"] == "killed" and report.verdict == "leak"
    assert report.source == "analysed now"


def test_unanalysed_run_is_analysed_without_touching_the_folder(clean_run: Path) -> None:
    before = folder_fingerprint(clean_run)
    assert _report(clean_run).verdict == "no_leak"
    assert folder_fingerprint(clean_run) == before


def test_unwritable_output_is_a_clear_error(leak_run: Path, tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "no-such-dir" / "report.html"
    assert main(["report", str(leak_run), "-o", str(target)]) == 73
    assert "cannot write" in capsys.readouterr().err


def test_views_import_light() -> None:
    """The views never pull torch, jinja2 or matplotlib into a plain import or `ls`."""
    code = ("import sys; import torchleak.views, torchleak.trace.query, torchleak.trace.catalog, "
            "torchleak.analysis.runs; "
            "print(sorted(m for m in ('torch', 'jinja2', 'matplotlib') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_stored_report_of_an_older_version_is_read(tmp_path: Path) -> None:
    path = make_trace(tmp_path / "old", report=False)
    writer = TraceWriter(path, claim=False)
    writer.judge(judgement_row("final", 60, OLDER_REPORT))
    writer.close()
    report = _report(path.parent)
    assert report.verdict == "no_leak" and report.source == "recorded at the end of the run"
    assert LEAK_PER_STEP  # the synthetic leak is not what this stored report says


OLDER_REPORT = {"verdict": "no_leak", "steps": 60, "findings": [],
                "signals": [{"name": "main_uss", "unit": "bytes", "verdict": "healthy"}],
                "future_field": 1}


def test_a_trace_from_before_the_judgements_table_is_read(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    """Schema 2 kept the final report in ``meta['report']`` and the live verdict in
    ``meta['live']``, the findings in a table of their own."""
    path = make_trace(tmp_path / "runs" / "old", report=False)
    finding = {"kind": "tensor_list", "culprit": "kept", "severity": "high", "fix": "",
               "bytes_per_step": 2048.0}
    conn = sqlite3.connect(path)
    conn.executescript("DROP VIEW findings; DROP TABLE judgements; CREATE TABLE findings (id "
                       "INTEGER PRIMARY KEY, phase TEXT, step INTEGER, kind TEXT, culprit "
                       "TEXT, severity TEXT, bytes_per_step REAL, detected_at_step INTEGER, "
                       "json TEXT); UPDATE meta SET value = '2' WHERE key = 'schema_version';")
    conn.execute("INSERT INTO meta VALUES ('report', ?)",
                 (json.dumps({**OLDER_REPORT, "verdict": "leak", "findings": [finding]}),))
    conn.execute("INSERT INTO findings (phase, step, kind, culprit, severity, json) VALUES "
                 "('final', 60, 'tensor_list', 'kept', 'high', ?)", (json.dumps(finding),))
    conn.commit()
    conn.close()
    report = _report(path.parent)
    assert report.verdict == "leak" and report.findings[0].bytes_per_step == 2048.0
    assert report.source == "recorded at the end of the run"
    assert main(["ls", "--runs-dir", str(tmp_path / "runs"), "--format", "json"]) == 0
    (line,) = json.loads(capsys.readouterr().out)
    assert (line["verdict"], line["findings"]) == ("leak", 1)
