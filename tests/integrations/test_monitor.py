"""torchleak.monitor() in the program's own process: never raises into it, joins a monitor
that already records, ends at exit when never stopped, and is the engine `run` uses."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

import torchleak

sys.path.insert(0, str(Path(__file__).parent))
from frameworks import loop  # noqa: E402

pytestmark = pytest.mark.integrations


def test_bad_option_values_warn_once_and_keep_their_defaults(tmp_path: Path) -> None:
    with pytest.warns(RuntimeWarning) as caught:
        monitor = torchleak.monitor(out=str(tmp_path / "run"), budget="lots", limit="12XB",
                                    guard="explode", colour=True, quiet=True)
    messages = [str(w.message) for w in caught]
    assert any("budget='lots'" in m and "using budget=0.01" in m for m in messages)
    assert any("limit='12XB'" in m and "12GiB" in m for m in messages)
    assert any("guard='explode'" in m and "warn, checkpoint, stop" in m for m in messages)
    assert any("no option 'colour'" in m for m in messages)
    with monitor:
        loop(20)
    assert monitor.report is not None and monitor.report.steps == 20
    assert monitor.options.guard == "warn" and monitor.options.limit is None


def test_an_unwritable_folder_leaves_the_program_running_unrecorded(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    with pytest.warns(RuntimeWarning, match="not recording"):
        with torchleak.monitor(out=str(blocker / "run"), quiet=True) as monitor:
            loop(5)  # runs whatever happened to the monitor
    assert monitor.report is None and monitor.failed


def test_a_second_monitor_joins_the_first_and_ends_nothing(tmp_path: Path) -> None:
    first = torchleak.monitor(out=str(tmp_path / "first"), quiet=True).start()
    try:
        with pytest.warns(RuntimeWarning, match="joins it"):
            second = torchleak.monitor(out=str(tmp_path / "second"), quiet=True).start()
        with second:  # nested use: entering and leaving it ends nothing
            loop(10)
        assert second.joined is first and second.report is None and first.running
        assert not (tmp_path / "second").exists()
    finally:
        report = first.stop()
    assert report is not None and report.steps == 10


def test_a_leak_in_process_is_reported_like_under_run(tmp_path: Path) -> None:
    kept: list[torch.Tensor] = []
    with torchleak.monitor(out=str(tmp_path / "run"), quiet=True) as monitor:
        loop(60, kept)
    report = monitor.report
    assert report.verdict == "leak"
    assert report.serious[0].culprit.startswith("local keep in loop() (list of Tensor")


SCRIPT = """
import torch, torchleak
from torch import nn
m = torchleak.monitor(out="started").start()   # never stopped: ends when Python exits
model = nn.Linear(8, 2); opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(12):
    loss = model(torch.randn(4, 8)).sum(); opt.zero_grad(); loss.backward(); opt.step()
with torchleak.monitor(out="inner"):   # under `torchleak run` this joins the CLI's monitor
    pass
print("script end")
"""


def run_python(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *args], cwd=cwd, text=True, capture_output=True,
                          timeout=120)


LEAKY = """
import torch, torchleak
model = torch.nn.Linear(16, 4); optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
history = []
with torchleak.monitor(out="run") as monitor:
    for _ in range(60):
        loss = model(torch.randn(8, 16)).pow(2).mean()
        optimizer.zero_grad(); loss.backward(); optimizer.step()
        history.append(loss)
print(monitor.report.serious[0].source)
"""


def test_an_in_process_finding_names_the_checkers_rule_as_run_and_report_do(
        tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent(LEAKY))
    done = run_python([str(script)], tmp_path)
    source = done.stdout.strip()
    assert source.endswith("train.py:9: history.append(loss)  [torchleak check: TL102]"), (
        done.stdout, done.stderr)
    assert "history.append(loss)  [torchleak check: TL102]" in done.stderr  # the summary
    reported = run_python(["-m", "torchleak", "report", "run"], tmp_path)
    assert reported.stdout.count("history.append(loss)  [torchleak check: TL102]") == 1, \
        reported.stdout


def test_a_started_monitor_ends_at_exit_and_joins_under_run(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent(SCRIPT))
    plain = run_python([str(script)], tmp_path)
    assert plain.returncode == 0 and "script end" in plain.stdout
    assert " after 12 steps" in plain.stderr  # the summary, printed at exit
    assert (tmp_path / "started" / "trace.sqlite").is_file()
    under = run_python(["-m", "torchleak", "run", "--out", "cli", str(script)], tmp_path)
    assert under.returncode == 0, under.stderr
    assert under.stderr.count(" after 12 steps") == 1  # one run: the CLI's
    assert "RuntimeWarning" not in under.stderr  # joining the CLI's monitor is silent
    assert (tmp_path / "cli" / "trace.sqlite").is_file()
