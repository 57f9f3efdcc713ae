"""`torchleak report`: text, JSON and HTML from synthetic traces (the recorder's writer)."""

from __future__ import annotations

import json
import re
import sys
import types
from pathlib import Path

import pytest

from torchleak.cli import main
from torchleak.report import Report
from torchleak.trace.writer import TraceWriter
from torchleak.views import build_view, render

from .synthetic import finding_dict, folder_fingerprint, make_trace

URL = re.compile(r"(https?:|ftp:|//[a-z0-9.-]+\.[a-z]{2,}|url\(|@import|<link|src=)", re.I)


def test_text_report_has_verdict_sparklines_and_findings(leak_run: Path) -> None:
    text = render(str(leak_run), "text", width=110)
    assert "Memory leak: 1 finding" in text
    assert "Trainer.losses (list)" in text and "+256 KiB/step" in text
    assert "append loss.item()" in text and "cgroup memory.max" in text
    for signal in ("main_uss", "workers_uss", "cuda_allocated", "tensor_bytes", "graph_bytes"):
        assert signal in text
    assert "▁" in text and "█" in text  # sparklines


def test_text_report_without_findings(clean_run: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _no_analysis(monkeypatch)
    text = render(str(clean_run), "text", width=110)
    assert "Not analysed" in text and "main_uss" in text and "flat" in text


def test_json_report_is_the_report_contract(leak_run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", str(leak_run), "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    report = Report.from_dict({k: data[k] for k in ("verdict", "steps", "findings", "signals", "reason")})
    assert report.verdict == "leak" and report.steps == 60
    assert report.findings[0].culprit == "Trainer.losses (list)"
    assert data["run"]["status"] == "finished" and data["run"]["script"] == "train.py"


def test_html_report_is_self_contained(leak_run: Path, tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "report.html"
    assert main(["report", str(leak_run), "-o", str(out)]) == 0
    html = out.read_text()
    assert not URL.search(html), URL.search(html)
    assert "<script" not in html
    for chart in ("chart-main", "chart-workers", "chart-cuda0", "chart-tensors", "chart-graph"):
        assert f'id="{chart}"' in html
    assert html.count('<svg class="chart"') >= 5
    assert 'class="trend"' in html and "fitted trend +256 KiB/step" in html
    assert 'class="oom"' in html and "projected OOM at step ~130" in html
    assert 'class="epoch"' in html and 'class="validation"' in html
    assert 'class="card finding sev-high"' in html and "append loss.item()" in html
    assert "verdict-leak" in html and "Trainer.losses (list)" in html


def test_html_report_without_findings(clean_run: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _no_analysis(monkeypatch)
    html = render(str(clean_run), "html")
    assert "No findings" in html and 'id="chart-main"' in html and "verdict-unknown" in html
    assert 'class="trend"' not in html  # flat signals get no fitted line


def test_long_traces_are_downsampled(tmp_path: Path) -> None:
    path = make_trace(tmp_path / "long", steps=6000, cuda=False)
    html = render(str(path), "html")
    longest = max(len(m.split()) for m in re.findall(r'points="([^"]*)"', html))
    assert longest <= 2000


def test_running_run_uses_online_findings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = make_trace(tmp_path / "live", status="running")
    writer = TraceWriter(path)
    writer.write_findings([finding_dict(60)])
    writer.close()
    _no_analysis(monkeypatch)
    view = build_view(path)
    assert view.state.status == "running" and view.findings[0].culprit == "Trainer.losses (list)"
    text = render(str(path), "text", width=110)
    assert "snapshot at step 60" in text and "online detection" in text


def test_analysis_failure_falls_back_to_recorded_report(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    path = make_trace(tmp_path / "killed", status="running", pid=2**22 + 12345)
    conn_writer = TraceWriter(path)
    conn_writer.set_meta("report", {"verdict": "no_leak", "steps": 60, "findings": [],
                                    "signals": [], "future_field": 1})
    conn_writer.close()
    _no_analysis(monkeypatch)
    view = build_view(path)
    assert view.state.status == "killed" and view.verdict == "no_leak"


def test_fresh_analysis_is_used_when_available(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = make_trace(tmp_path / "unanalysed", report=False)
    fake = types.ModuleType("torchleak.analysis")
    fake.analyze = lambda trace: Report(verdict="inconclusive", steps=60, reason="too short")  # type: ignore[attr-defined]
    fake.analyze_connection = lambda conn: fake.analyze(None)  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "torchleak.analysis", fake)
    # `import torchleak.analysis as a` reads the package attribute first once imported.
    import torchleak

    monkeypatch.setattr(torchleak, "analysis", fake, raising=False)
    view = build_view(path)
    assert view.verdict == "inconclusive" and view.report_source == "analysed now"


def _no_analysis(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = types.ModuleType("torchleak.analysis")

    def analyze(trace: Path) -> Report:
        raise RuntimeError("analysis exploded")

    fake.analyze = analyze  # type: ignore[attr-defined]
    fake.analyze_connection = analyze  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "torchleak.analysis", fake)
    # `import torchleak.analysis as a` reads the package attribute first once imported.
    import torchleak

    monkeypatch.setattr(torchleak, "analysis", fake, raising=False)


def test_unanalysed_run_is_analysed_without_touching_the_folder(clean_run: Path) -> None:
    before = folder_fingerprint(clean_run)
    view = build_view(clean_run)
    assert view.report is not None or view.report_source == "no analysis available"
    assert folder_fingerprint(clean_run) == before


def test_unwritable_output_is_a_clear_error(leak_run: Path, tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "no-such-dir" / "report.html"
    assert main(["report", str(leak_run), "-o", str(target)]) == 73
    assert "cannot write" in capsys.readouterr().err


def test_views_import_light() -> None:
    """The views never pull torch, jinja2 or matplotlib into a plain import or `ls`."""
    import subprocess

    code = ("import sys; import torchleak.views, torchleak.views.query, torchleak.views.runs; "
            "print(sorted(m for m in ('torch', 'jinja2', 'matplotlib') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
