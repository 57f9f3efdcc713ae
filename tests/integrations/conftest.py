"""Fixtures shared by the integration tests: real Lightning, Hugging Face, torchrun and
IPython runs on tiny models built in code.

Each framework run costs seconds of imports, so every run the tests share is started once,
two at a time (2 cores), when the first test asks for one; the tests read the results.
"""

from __future__ import annotations

import importlib.util
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

SCRIPTS = Path(__file__).parent / "scripts"
PARALLEL = 2


def installed(*modules: str) -> bool:
    return all(importlib.util.find_spec(m) is not None for m in modules)


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


def _launch(folder: Path, argv: list[str], live: list[subprocess.Popen[str]]) -> Run:
    folder.mkdir(parents=True, exist_ok=True)
    proc = subprocess.Popen(argv, cwd=folder, env=child_env(folder), text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)
    live.append(proc)
    try:
        out, err = proc.communicate(timeout=400)
    except subprocess.TimeoutExpired:
        _kill(proc)
        out, err = proc.communicate()
    finally:
        live.remove(proc)
    return Run(subprocess.CompletedProcess(argv, proc.returncode, out, err), folder)


def _kill(proc: subprocess.Popen[str]) -> None:
    """The run and every process it started (torchrun's and Lightning's ranks)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
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
        self._live: list[subprocess.Popen[str]] = []

    def start_all(self) -> None:
        for name, (modules, argv) in RUNS.items():
            if installed(*modules):
                self._futures[name] = self._executor.submit(_launch, self.base / name, argv,
                                                            self._live)

    def get(self, name: str) -> Run:
        modules = RUNS[name][0]
        if name not in self._futures:
            pytest.skip(f"needs {', '.join(modules)}: pip install {' '.join(modules)}")
        return self._futures[name].result()

    def shutdown(self) -> None:
        """Runs no test asked for (a subset of the tests was selected) are not waited for."""
        self._executor.shutdown(wait=False, cancel_futures=True)
        for proc in list(self._live):
            _kill(proc)


@pytest.fixture(scope="session", autouse=True)
def framework_runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunPool]:
    pool = RunPool(tmp_path_factory.mktemp("integrations"))
    pool.start_all()
    yield pool
    pool.shutdown()
