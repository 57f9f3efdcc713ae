"""Text from a trace cannot steer the terminal: a holder, a culprit, a source file and a
run name carrying escape sequences are shown escaped by every text view."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

# A leak held under an attribute whose name is an escape sequence (set the window title,
# ring the bell, clear the screen), in a script whose own file name starts red.
HOSTILE = textwrap.dedent("""
    import torch

    torch.set_num_threads(1)


    class Store:
        pass


    KEY = "grads\\x1b]0;pwned\\x07\\x1b[2J" + chr(0xDCFF)  # and a lone surrogate
    store = Store()
    store.__dict__[KEY] = []
    model = torch.nn.Linear(32, 4)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for step in range(80):
        loss = model(torch.randn(64, 32)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        store.__dict__[KEY].append(loss)  # every loss keeps its autograd graph
    print("trained", len(store.__dict__[KEY]))
""")
SCRIPT = "evil\x1b[31m.py"
RAW = ("\x1b", "\x07")


def _torchleak(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, OMP_NUM_THREADS="1", TORCHLEAK_RUNS_DIR=str(cwd / "runs"))
    return subprocess.run([sys.executable, "-m", "torchleak", *args], cwd=cwd, env=env,
                          text=True, capture_output=True, timeout=300)


@pytest.fixture(scope="module")
def hostile_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    work = tmp_path_factory.mktemp("hostile")
    (work / SCRIPT).write_text(HOSTILE)
    proc = _torchleak("run", "--out", "runs/hostile", SCRIPT, cwd=work)
    assert proc.returncode in (0, 3) and proc.stdout == "trained 80\n", proc.stderr
    # Without --out the run folder is named after the script, escapes and all.
    named = _torchleak("run", SCRIPT, cwd=work)
    assert named.returncode == proc.returncode, named.stderr
    return work, proc.stderr + named.stderr


def _assert_inert(text: str) -> None:
    for char in RAW:
        assert char not in text, repr(text)
    assert "\\x1b" in text, text  # the hostile text is there, escaped


def test_the_run_summary_shows_the_escapes(hostile_run: tuple[Path, str]) -> None:
    _work, stderr = hostile_run
    _assert_inert(stderr)
    assert "grads\\x1b]0;pwned\\x07\\x1b[2J" in stderr


@pytest.mark.parametrize("argv", [["report", "runs/hostile"], ["top", "runs/hostile", "--once"],
                                  ["ls", "--runs-dir", "runs"],
                                  ["diff", "runs/hostile", "runs/hostile"],
                                  ["query", "runs/hostile", "SELECT culprit FROM findings"]])
def test_every_text_view_shows_the_escapes(hostile_run: tuple[Path, str], argv: list[str]
                                           ) -> None:
    work, _stderr = hostile_run
    proc = _torchleak(*argv, cwd=work)
    assert proc.returncode in (0, 3), proc.stderr
    _assert_inert(proc.stdout + proc.stderr)


def test_the_trace_holds_valid_utf8_only(hostile_run: tuple[Path, str]) -> None:
    import sqlite3

    work, _stderr = hostile_run
    conn = sqlite3.connect(f"file:{work / 'runs/hostile/trace.sqlite'}?mode=ro", uri=True)
    conn.text_factory = bytes
    try:
        holders = [h for (h,) in conn.execute("SELECT DISTINCT holder FROM holders")]
        culprits = [c for (c,) in conn.execute("SELECT culprit FROM findings")]
    finally:
        conn.close()
    texts = [t.decode("utf-8") for t in holders + culprits]  # strict: raises if invalid
    assert any("store.grads" in t and t.endswith("\\udcff") for t in texts), texts


def test_the_json_report_keeps_the_text_as_it_was(hostile_run: tuple[Path, str]) -> None:
    import json

    work, _stderr = hostile_run
    proc = _torchleak("report", "runs/hostile", "--format", "json", cwd=work)
    culprits = [f["culprit"] for f in json.loads(proc.stdout)["findings"]]
    assert any("grads\x1b]0;pwned\x07\x1b[2J" in c for c in culprits), culprits
