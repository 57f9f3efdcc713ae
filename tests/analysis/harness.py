"""Record a real training loop in-process and analyse it, as ``torchleak run`` would.

Importing torch costs seconds, so the leak and healthy scenarios run inside the test
process: a ``Recorder`` writes a trace for the loop, then the same analysis the CLI uses
turns it into a ``Report``. The few end-to-end tests use ``run_cli`` instead.

The loop runs on a thread of its own, as a script's loop runs under ``torchleak run``
with nothing of the user's above it: torchleak's holder walk starts from the user frames
on the stack, and must meet the loop's locals, not this harness or pytest's fixtures.
"""

from __future__ import annotations

import gc
import json
import os
import sqlite3
import subprocess
import sys
import textwrap
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from torchleak.report import Finding, Report

KIB = 1024
MIB = 1024 * 1024
SERIOUS = ("high", "medium")

@dataclass
class Recorded:
    report: Report
    trace: Path

    def rows(self, sql: str, *params: Any) -> list[tuple[Any, ...]]:
        conn = sqlite3.connect(f"file:{self.trace}?mode=ro", uri=True)
        try:
            return conn.execute(sql, params).fetchall()
        finally:
            conn.close()

    def explain(self) -> str:
        """Everything a failing assertion should show: the report and the holder table."""
        holders = self.rows("SELECT holder, COUNT(*), MIN(length), MAX(length) FROM holders "
                            "GROUP BY holder ORDER BY MAX(length) - MIN(length) DESC LIMIT 12")
        steps = self.rows("SELECT MIN(step), MAX(step), MIN(uss), MAX(uss) FROM steps")
        return (f"{self.report.to_json()}\nsteps/uss: {steps}\nholders (top growth): "
                + "\n  ".join(map(str, holders)))


def record_loop(train: Callable[[], Any], folder: Path, name: str, script: str,
                budget: float = 0.01) -> Recorded:
    """Record ``train()`` (a real CPU training loop) under a Monitor, as ``torchleak run``
    and ``torchleak.monitor()`` do, and return its final Report."""
    import torch

    from torchleak.live.engine import Monitor, MonitorOptions

    torch.set_num_threads(1)
    gc.collect()  # earlier scenarios' garbage must not be collected inside this one
    # The budget as ``torchleak run`` counts it, from the process's start: these loops
    # stand for a script's (in-process, it would count from the monitor's start).
    monitor = Monitor(MonitorOptions(out=folder / name, name=name, script=script,
                                     budget=budget, quiet=True, owns_process=True))
    monitor.start()
    failure = _run_on_thread(train)
    report = monitor.stop("crashed" if failure else "finished", 1 if failure else 0)
    if failure is not None:
        raise failure
    assert report is not None and monitor.trace is not None
    return Recorded(report, monitor.trace)


def record_in_fresh_process(module_file: str, function: str, folder: Path,
                            name: str) -> Recorded:
    """``record_loop`` of ``function`` (defined in ``module_file``) in a new interpreter.

    For loops whose memory depends on the heap's history: each time a large mmap()ed
    block is freed, glibc raises its mmap threshold for good and its trim threshold to
    twice that (mallopt(3)), up to 64 MiB of freed memory kept before it trims. The test
    process has freed many such blocks, so a sawtooth that a fresh heap gives back to
    the system at each trough stays in the heap here. A script starts from a fresh heap;
    so does this."""
    module = Path(module_file)
    code = textwrap.dedent(f"""
        import importlib.util, sys
        sys.path[:0] = [{str(module.parent)!r}, {str(module.parent.parent)!r}]
        from pathlib import Path
        from harness import record_loop
        spec = importlib.util.spec_from_file_location("scenarios", {str(module)!r})
        scenarios = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(scenarios)
        run = record_loop(getattr(scenarios, {function!r}), Path({str(folder)!r}), {name!r},
                          {str(module)!r})
        Path({str(folder / "report.json")!r}).write_text(run.report.to_json())
        print(run.trace)
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300, env=one_thread_env())
    assert proc.returncode == 0, proc.stderr[-4000:]
    report = Report.from_json((folder / "report.json").read_text())
    assert report is not None
    return Recorded(report, Path(proc.stdout.strip().splitlines()[-1]))


def _run_on_thread(train: Callable[[], Any]) -> BaseException | None:
    failures: list[BaseException] = []

    def main() -> None:
        try:
            train()
        except BaseException as err:  # noqa: BLE001 - re-raised on the test's thread
            failures.append(err)

    thread = threading.Thread(target=main, name="training-loop")
    thread.start()
    thread.join()
    return failures[0] if failures else None


# Assertions -------------------------------------------------------------------------------

def theil_sen(xs: list[float], ys: list[float]) -> float:
    """Median of pairwise slopes (numpy, independent of torchleak's own statistics)."""
    import numpy as np

    x, y = np.asarray(xs, dtype=float), np.asarray(ys, dtype=float)
    if len(x) > 600:
        keep = np.linspace(0, len(x) - 1, 600).astype(int)
        x, y = x[keep], y[keep]
    i, j = np.triu_indices(len(x), k=1)
    ok = x[j] != x[i]
    return float(np.median((y[j] - y[i])[ok] / (x[j] - x[i])[ok]))


def growth_per_step(xs: list[float], ys: list[float]) -> float:
    """What the process lost per step over the window: the median of its last quarter less
    the median of its first quarter, over the steps between them. Unlike a median of
    pairwise slopes it sees an allocator's staircase (one or two big jumps) as the growth
    it is, and transient spikes do not move it."""
    import numpy as np

    if len(xs) < 8:
        return 0.0
    quarter = len(xs) // 4
    x, y = np.asarray(xs, dtype=float), np.asarray(ys, dtype=float)
    span = float(np.median(x[-quarter:]) - np.median(x[:quarter]))
    return float(np.median(y[-quarter:]) - np.median(y[:quarter])) / span if span else 0.0


def serious(report: Report) -> list[Finding]:
    return [f for f in report.findings if f.severity in SERIOUS]


def finding_for(report: Report, *names: str) -> Finding | None:
    """The serious finding whose culprit names the holder (any of ``names``)."""
    for finding in serious(report):
        if any(n in finding.culprit for n in names):
            return finding
    return None


def assert_leak(run: Recorded, *names: str, kind: str | None = None) -> Finding:
    report = run.report
    assert report.verdict == "leak", run.explain()
    finding = finding_for(report, *names)
    assert finding is not None, f"no high/medium finding names {names}:\n{run.explain()}"
    if kind is not None:
        assert finding.kind == kind, run.explain()
    return finding


def assert_healthy(run: Recorded) -> None:
    assert run.report.verdict == "no_leak", run.explain()
    assert serious(run.report) == [], run.explain()


def assert_rate(value: float | None, truth: float, low: float = 0.5, high: float = 2.0,
                what: str = "rate", run: Recorded | None = None) -> None:
    assert value is not None and low * truth <= value <= high * truth, (
        f"{what} {value} not within {low}x-{high}x of the planted {truth}\n"
        + (run.explain() if run else ""))


# The CLI, end to end --------------------------------------------------------------------

def one_thread_env() -> dict[str, str]:
    """This environment with torch's thread pools at one thread: the scripts' memory and
    speed then do not depend on how many cores the machine has."""
    return dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")


def run_cli(folder: Path, source: str, *options: str, timeout: float = 120,
            module: str | None = None
            ) -> tuple[subprocess.CompletedProcess[str], dict[str, Any] | None]:
    """``python -m torchleak run --json out.json [options] script.py`` in a fresh process
    (``module``: the source is that module of a package in ``folder``, run with ``-m``)."""
    script = folder / "train.py"
    if module is not None:
        script = folder.joinpath(*module.split(".")).with_suffix(".py")
        script.parent.mkdir(parents=True, exist_ok=True)
        (script.parent / "__init__.py").write_text("")
    script.write_text(textwrap.dedent(source).lstrip())
    target = ["-m", module] if module is not None else [str(script)]
    out_json = folder / "out.json"
    proc = subprocess.run([sys.executable, "-m", "torchleak", "run", "--quiet", "--out",
                           str(folder / "run"), "--json", str(out_json), *options, *target],
                          cwd=folder, capture_output=True, text=True, timeout=timeout,
                          env=one_thread_env())
    report = json.loads(out_json.read_text()) if out_json.exists() else None
    return proc, report


def run_plain(folder: Path, source: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """``python plain.py`` in a fresh process, with ``run_cli``'s environment: the script's
    own behaviour, nothing of ours in it."""
    script = folder / "plain.py"
    script.write_text(textwrap.dedent(source).lstrip())
    return subprocess.run([sys.executable, str(script)], cwd=folder, capture_output=True,
                          text=True, timeout=timeout, env=one_thread_env())


def scenario_fixture(scenarios: dict[str, Callable[[], None]],
                     cleanup: list[Callable[[], object]], script: str) -> Any:
    """A ``scenario`` fixture (parametrized indirectly by name) that records each named
    loop once per session; ``cleanup`` runs after the recording, its end-of-run walk
    included, so what a loop leaves for that walk is still there."""
    import pytest

    recorded: dict[str, Recorded] = {}

    @pytest.fixture
    def scenario(request: pytest.FixtureRequest,
                 tmp_path_factory: pytest.TempPathFactory) -> Recorded:
        name = request.param
        if name not in recorded:
            try:
                recorded[name] = record_loop(scenarios[name], tmp_path_factory.mktemp(name),
                                             name, script)
            finally:
                while cleanup:
                    cleanup.pop()()
        return recorded[name]

    return scenario
