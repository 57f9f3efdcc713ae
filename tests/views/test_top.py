"""`torchleak top` under a pseudo-terminal, following a trace another process is writing."""

from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import signal
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

import pytest

from torchleak.cli import main

WRITER = Path(__file__).with_name("live_writer.py")
# The header's "<status>  step N", not "at step N" of a census value or "step N:" of an event.
STEP = re.compile(rb"(?:running|finished|killed|crashed|stopped)(?:\x1b\[[\d;]*m)*\s+step ([\d,]+)")


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


class PtyProcess:
    """A child process on a pseudo-terminal, so rich draws live frames as for a person."""

    def __init__(self, argv: list[str]) -> None:
        master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
        env = dict(os.environ, TERM="xterm-256color", COLUMNS="120", LINES="40")
        # As a terminal's foreground job: Ctrl-C's SIGINT acts even when this suite runs
        # in the background of a shell (which starts its jobs with SIGINT ignored).
        self.proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave,
                                     close_fds=True, env=env, start_new_session=True,
                                     preexec_fn=_default_sigint)
        os.close(slave)
        self.master = master
        self.output = b""

    def read_until(self, predicate: object, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if predicate(self.output):  # type: ignore[operator]
                return True
            ready, _, _ = select.select([self.master], [], [], 0.1)
            if ready:
                try:
                    self.output += os.read(self.master, 65536)
                except OSError:  # the child closed the terminal
                    return bool(predicate(self.output))  # type: ignore[operator]
        return bool(predicate(self.output))  # type: ignore[operator]

    def close(self) -> int:
        """Wait for the child, reading what it still draws: a terminal whose buffer nobody
        reads blocks the child's last frame (seen under load: top never exited)."""
        try:
            self.read_until(lambda _out: self.proc.poll() is not None, timeout=30)
            return self.proc.wait(timeout=10)
        finally:
            os.close(self.master)


def _steps_seen(output: bytes) -> list[int]:
    return [int(m.replace(b",", b"")) for m in STEP.findall(output)]


def _start_writer(folder: Path, steps: int, pause: float, *extra: str) -> subprocess.Popen[bytes]:
    writer = subprocess.Popen([sys.executable, str(WRITER), str(folder), str(steps), str(pause), *extra])
    deadline = time.monotonic() + 20
    while not (folder / "trace.sqlite-wal").exists():
        assert time.monotonic() < deadline and writer.poll() is None, "the writer did not start"
        time.sleep(0.05)
    return writer


def _top(folder: Path) -> PtyProcess:
    return PtyProcess([sys.executable, "-m", "torchleak", "top", str(folder), "--interval", "0.2"])


def test_top_follows_a_run_and_exits_when_it_ends(tmp_path: Path) -> None:
    run = tmp_path / "live-run"
    writer = _start_writer(run, steps=50, pause=0.05)
    top = _top(run)
    try:
        assert top.read_until(lambda out: b"finished" in out and b"final frame" in out, timeout=30), \
            top.output[-3000:]
    finally:
        writer.wait(timeout=30)
        code = top.close()
    assert code == 0
    seen = _steps_seen(top.output)
    assert len(set(seen)) >= 3, seen  # the numbers changed from frame to frame
    assert seen == sorted(seen) and seen[-1] == 50
    assert b"main USS" in top.output and "▁".encode() in top.output


def test_ctrl_c_exits_cleanly(tmp_path: Path) -> None:
    run = tmp_path / "long-run"
    writer = _start_writer(run, steps=2000, pause=0.05)
    top = _top(run)
    try:
        assert top.read_until(lambda out: len(set(_steps_seen(out))) >= 2, timeout=30), top.output[-3000:]
        top.proc.send_signal(signal.SIGINT)
        code = top.close()
    finally:
        writer.kill()
        writer.wait()
    assert code == 0
    assert b"Traceback" not in top.output and b"KeyboardInterrupt" not in top.output


def test_killed_run_is_shown_as_killed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = tmp_path / "killed-run"
    writer = _start_writer(run, 12, 0.01, "--no-finish")
    writer.wait(timeout=30)
    assert main(["top", str(run), "--once"]) == 0
    out = capsys.readouterr().out
    assert "killed" in out and "step 12" in out


SLOW_TRAIN = """
import time
import torch

model = torch.nn.Linear(32, 4)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
losses = []
for step in range(80):
    loss = model(torch.randn(64, 32)).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses.append(loss)
    time.sleep(0.03)
"""


@pytest.mark.slow
def test_top_on_a_real_recording(tmp_path: Path) -> None:
    """`top` follows the real recorder's WAL trace while `torchleak run` trains."""
    (tmp_path / "train.py").write_text(SLOW_TRAIN)
    run = tmp_path / "runs" / "slow"
    recorder = subprocess.Popen([sys.executable, "-m", "torchleak", "run", "--quiet", "--out",
                                 str(run), "train.py"], cwd=tmp_path)
    try:
        deadline = time.monotonic() + 60
        while not (run / "trace.sqlite").exists():
            assert time.monotonic() < deadline and recorder.poll() is None, "no trace appeared"
            time.sleep(0.05)
        top = _top(run)
        ended = top.read_until(lambda out: b"final frame" in out, timeout=90)
        code = top.close()
    finally:
        recorder.wait(timeout=60)
    assert ended and code == 0, top.output[-3000:]
    seen = _steps_seen(top.output)
    assert seen[-1] == 80 and len(set(seen)) >= 3, seen
    assert b"finished" in top.output


LEAKY_SLOW = """
import time
import torch

model = torch.nn.Linear(32, 4)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
kept = []
for step in range(600):
    loss = model(torch.randn(64, 32)).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    kept.append(torch.randn(128, 256))  # 128 KiB a step
    time.sleep(0.02)
"""


@pytest.mark.slow
def test_top_once_shows_the_live_finding_while_the_run_goes_on(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text(LEAKY_SLOW)
    run = tmp_path / "runs" / "leaky"
    recorder = subprocess.Popen([sys.executable, "-m", "torchleak", "run", "--quiet", "--out",
                                 str(run), "train.py"], cwd=tmp_path)
    frame = ""
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and recorder.poll() is None:
            if (run / "trace.sqlite").exists():
                frame = subprocess.run([sys.executable, "-m", "torchleak", "top", "--once",
                                        str(run)], capture_output=True, text=True).stdout
                if "live verdict: leak" in frame:
                    break
            time.sleep(0.5)
        still_running = recorder.poll() is None
    finally:
        recorder.wait(timeout=90)
    assert "live verdict: leak" in frame and "global kept in train.py" in frame, frame
    assert still_running and "running" in frame  # seen before the run ended
