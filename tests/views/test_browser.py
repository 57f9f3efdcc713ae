"""The HTML report in a real browser: headless Chromium renders the plots and findings.

Needs Debian's chromium (`apt-get install -y chromium`); skipped with the reason when absent.
Screenshots are kept under test-artifacts/views/ (gitignored).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from torchleak.cli import main
from torchleak.analysis.job import run_report
from torchleak.trace.catalog import run_folder

pytestmark = pytest.mark.browser

CHROMIUM = next((shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome")
                 if shutil.which(n)), None)
needs_chromium = pytest.mark.skipif(
    CHROMIUM is None, reason="headless chromium not installed (apt-get install -y chromium)")

# Injected into a copy of the report (never into the product): measures what the browser
# actually laid out and writes it into the DOM, which --dump-dom then prints.
PROBE = """
<script>
window.addEventListener('load', () => {
  const seen = el => { const r = el.getBoundingClientRect(); const s = getComputedStyle(el);
    return r.width > 50 && r.height > 20 && s.visibility !== 'hidden' && s.display !== 'none'; };
  const charts = [...document.querySelectorAll('svg.chart')];
  const result = {
    charts: charts.filter(seen).length,
    lines: charts.map(c => [...c.querySelectorAll('polyline.series')]
      .filter(p => p.getTotalLength() > 10).length),
    findings: [...document.querySelectorAll('.finding')].filter(seen).length,
    findingsSection: seen(document.getElementById('findings')),
    verdict: document.getElementById('verdict').innerText.trim(),
    trends: document.querySelectorAll('line.trend').length,
    oom: document.querySelectorAll('line.oom').length,
  };
  const out = document.createElement('pre'); out.id = 'probe-result';
  out.textContent = JSON.stringify(result); document.body.appendChild(out);
});
</script>
"""


def _chromium(*args: str) -> subprocess.CompletedProcess[str]:
    assert CHROMIUM is not None
    argv = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
            "--no-first-run", "--disable-dev-shm-usage", "--host-resolver-rules=MAP * ~NOTFOUND",
            "--virtual-time-budget=3000", *args]
    env = dict(os.environ, HOME=os.environ.get("HOME", "/tmp"))
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, env=env)


def _probe(html: Path) -> dict[str, object]:
    probed = html.with_name("probed-" + html.name)
    probed.write_text(html.read_text().replace("</body>", PROBE + "</body>"))
    dom = _chromium("--dump-dom", probed.as_uri()).stdout
    match = re.search(r'<pre id="probe-result">(.*?)</pre>', dom, re.S)
    assert match, dom[-2000:]
    return json.loads(match.group(1).replace("&quot;", '"').replace("&amp;", "&"))


def _screenshot(html: Path, png: Path) -> None:
    png.unlink(missing_ok=True)
    _chromium(f"--screenshot={png}", "--window-size=1200,2600", html.as_uri())
    assert png.exists() and png.stat().st_size > 20_000, "blank or missing screenshot"


def _render(run: Path, out: Path) -> Path:
    assert main(["report", str(run), "--format", "html", "-o", str(out)]) == 0
    return out


@needs_chromium
def test_recorded_run_report_in_chromium(recorded_run: Path, tmp_path: Path, artifacts: Path) -> None:
    html = _render(recorded_run, tmp_path / "report.html")
    result = _probe(html)
    assert result["charts"] >= 3, result  # main process, live tensors, tensor count, graph
    assert all(n >= 1 for n in result["lines"]), result  # every chart draws its line
    assert result["findingsSection"], result
    # Whatever the analysis concluded about this run, each of its findings is a visible card.
    folder = run_folder(recorded_run)
    assert folder is not None
    assert result["findings"] == len(run_report(folder).findings), result
    _screenshot(html, artifacts / "report-recorded-run.png")
    shutil.copy(html, artifacts / "report-recorded-run.html")


@needs_chromium
def test_findings_cards_trend_and_oom_in_chromium(leak_run: Path, tmp_path: Path,
                                                  artifacts: Path) -> None:
    html = _render(leak_run, tmp_path / "leak.html")
    result = _probe(html)
    assert result["findings"] == 1 and "Memory leak" in str(result["verdict"]), result
    assert result["charts"] >= 6 and result["trends"] >= 1 and result["oom"] == 1, result
    _screenshot(html, artifacts / "report-synthetic-leak.png")
