"""Fixtures shared by the integration tests: real Lightning, Hugging Face, torchrun and
IPython runs on tiny models built in code.

Each framework run costs seconds of imports, so every run the tests share is started once,
two at a time (2 cores), when the first test asks for one; the tests read the results.
"""

from __future__ import annotations

import inspect
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest
from integrationkit import installed

SCRIPTS = Path(__file__).parent / "scripts"
PARALLEL = 2


def child_env(folder: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", TORCHLEAK_RUNS_DIR=str(folder / "runs"),
               TOKENIZERS_PARALLELISM="false", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1",
               PYTHONWARNINGS="ignore")
    env.pop("PYTHONUNBUFFERED", None)
    return env


@dataclass
class Run:
    """One finished process: its result and the folder it ran in."""

    proc: subprocess.CompletedProcess[str]
    folder: Path

    @property
    def output(self) -> str:
        return self.proc.stdout + self.proc.stderr


# Runs the command detached: this launcher forks a waiter in a session of its own and
# exits, so the run is no descendant of the test process. The in-process monitors of the
# tests here count every descendant as a DataLoader worker; a framework run still going
# on a busy machine would otherwise be measured as one of their workers.
_DETACH = r"""
import os, subprocess, sys
folder, argv = sys.argv[1], sys.argv[2:]
pid = os.fork()
if pid:
    print(pid, flush=True)
    os._exit(0)
os.setsid()
null = os.open(os.devnull, os.O_RDWR)
for fd in (0, 1, 2):
    os.dup2(null, fd)
with open(os.path.join(folder, ".launch-stdout"), "w") as out, \
        open(os.path.join(folder, ".launch-stderr"), "w") as err:
    code = subprocess.call(argv, cwd=folder, stdout=out, stderr=err, stdin=subprocess.DEVNULL)
with open(os.path.join(folder, ".launch-exit.tmp"), "w") as f:
    f.write(str(code))
os.replace(os.path.join(folder, ".launch-exit.tmp"), os.path.join(folder, ".launch-exit"))
"""
TIMEOUT = 600  # a generous bound: a run that never ends fails its tests, it does not hang


def _launch(folder: Path, argv: list[str], live: list[int], stop: threading.Event) -> Run:
    import time

    folder.mkdir(parents=True, exist_ok=True)
    launcher = subprocess.run([sys.executable, "-c", _DETACH, str(folder), *argv], cwd=folder,
                              env=child_env(folder), capture_output=True, text=True, timeout=120)
    session = int(launcher.stdout)
    live.append(session)
    done = folder / ".launch-exit"
    deadline = time.monotonic() + TIMEOUT
    try:
        # Polls for the end (the event itself, not a duration) until the pool shuts down.
        while not done.exists() and time.monotonic() < deadline and not stop.wait(0.2):
            pass
    finally:
        live.remove(session)
        if not done.exists():
            _kill(session)
    code = int(done.read_text()) if done.exists() else -signal.SIGKILL
    out = (folder / ".launch-stdout").read_text(errors="replace")
    err = (folder / ".launch-stderr").read_text(errors="replace")
    return Run(subprocess.CompletedProcess(argv, code, out, err), folder)


def _kill(session: int) -> None:
    """The run and every process it started (torchrun's and Lightning's ranks)."""
    try:
        os.killpg(session, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _python(script: str, *args: str) -> list[str]:
    return [sys.executable, str(SCRIPTS / script), *args]


def _torchleak_run(script: str, *args: str) -> list[str]:
    return [sys.executable, "-m", "torchleak", "run", "--out", "under-run", str(SCRIPTS / script),
            *args]


def _torchrun(script: str) -> list[str]:
    return [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2", "-m",
            "torchleak", "run", "--out", "launch", str(SCRIPTS / script)]


# name -> (modules it needs, command)
RUNS: dict[str, tuple[tuple[str, ...], list[str]]] = {
    "lightning_leak": (("lightning",), _python("lightning_loop.py", "--leak", "--callback",
                                               "--report", "report.json", "--out", "cb")),
    "lightning_healthy": (("lightning",), _python("lightning_loop.py", "--callback", "--report",
                                                  "report.json", "--out", "cb")),
    "lightning_leak_run": (("lightning",), _torchleak_run("lightning_loop.py", "--leak")),
    "hf_leak": (("transformers", "accelerate"),
                _python("hf_loop.py", "--leak", "--callback", "--history", "history.json",
                        "--report", "report.json", "--out", "cb")),
    "hf_healthy": (("transformers", "accelerate"),
                   _python("hf_loop.py", "--callback", "--history", "history.json", "--report",
                           "report.json", "--out", "cb")),
    "hf_leak_run": (("transformers", "accelerate"), _torchleak_run("hf_loop.py", "--leak")),
    "lightning_guard": (("lightning",), _python("lightning_loop.py", "--callback", "--guard",
                                                "--out", "cb")),
    "hf_guard": (("transformers", "accelerate"), _python("hf_loop.py", "--callback", "--guard",
                                                         "--out", "cb")),
    "torchrun": ((), _torchrun("ddp_loop.py")),
    "lightning_ddp": (("lightning",), _python("lightning_ddp.py")),
}


class RunPool:
    def __init__(self, base: Path) -> None:
        self.base = base
        self._executor = ThreadPoolExecutor(PARALLEL)
        self._futures: dict[str, Future[Run]] = {}
        self._live: list[int] = []  # the detached runs' sessions
        self._stop = threading.Event()  # set at shutdown: no thread waits on a killed run

    def start_all(self) -> None:
        for name, (modules, argv) in RUNS.items():
            if installed(*modules):
                self._futures[name] = self._executor.submit(_launch, self.base / name, argv,
                                                            self._live, self._stop)

    def get(self, name: str) -> Run:
        modules = RUNS[name][0]
        if name not in self._futures:
            pytest.skip(f"needs {', '.join(modules)}: pip install {' '.join(modules)}")
        return self._futures[name].result()

    def shutdown(self) -> None:
        """Runs no test asked for (a subset of the tests was selected) are not waited for."""
        self._stop.set()
        self._executor.shutdown(wait=False, cancel_futures=True)
        for session in list(self._live):
            _kill(session)


def _reads_runs(item: pytest.Item) -> bool:
    function = getattr(item, "function", None)
    return function is not None and "framework_runs" in inspect.signature(function).parameters


@pytest.fixture(scope="session", autouse=True)
def framework_runs(request: pytest.FixtureRequest,
                   tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunPool]:
    """Autouse, so the runs go on beside this folder's other tests; started only when a
    selected test reads one."""
    pool = RunPool(tmp_path_factory.mktemp("integrations"))
    if any(_reads_runs(item) for item in request.session.items):
        pool.start_all()
    yield pool
    pool.shutdown()
