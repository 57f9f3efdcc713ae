"""Never harmful, never lossy: what a program does under ``torchleak run`` it does without
it (memory freed when it frees it, its own environment, its death signal, its output), and
every fault on torchleak's side (a full disk, a locked trace, a bad option) degrades into
one line instead of changing the program's fate."""

from __future__ import annotations

import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from recordkit import (Recorded, RunPool, child_env, memory_cgroup, plain_then_recorded,
                       prefetch, record, run_python, run_torchleak, weight, without_our_lines,
                       write_script)

from torchleak.errors import EXIT_CANTCREAT, EXIT_USAGE

pytestmark = pytest.mark.slow

# A training function that deletes a 100 MB tensor after each step. Its own hook, run at
# every step boundary after torchleak's, counts the deleted tensors still alive.
DELETED_LOCAL = """
    import resource
    import weakref

    import torch
    from torch.optim.optimizer import register_optimizer_step_post_hook

    REFS = []
    ALIVE = []


    def check(optimizer, args, kwargs):
        ALIVE.append(sum(ref() is not None for ref in REFS))
        REFS.clear()


    def train():
        torch.manual_seed(0)
        torch.set_num_threads(1)
        model = torch.nn.Linear(64, 8)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
        register_optimizer_step_post_hook(check)
        for step in range(60):
            big = torch.ones(25_000_000)  # 100 MB, deleted every step
            loss = model(torch.randn(32, 64)).pow(2).mean() + 0 * big[0]
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            REFS.append(weakref.ref(big))
            del big
        print("deleted tensors alive at the next boundary:", sum(ALIVE))
        print("peak MiB", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024)


    train()
"""

ENVIRONMENT = """
    import os
    os.environ["OMP_NUM_THREADS"] = "1"
    import torch  # the script's own first import of torch: the variable above must hold

    torch.manual_seed(3)
    a, b = torch.randn(256, 256), torch.randn(256, 256)
    print("threads", torch.get_num_threads())
    print("product", repr((a @ b).sum().item()))
"""

INTERRUPTED = """
    import atexit

    import torch

    model = torch.nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(30):
        loss = model(torch.randn(8, 4)).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    atexit.register(print, "the script's atexit handler ran")  # python runs it, then dies
    notes = open("interrupted.txt", "w")  # never closed: python flushes it before dying
    notes.write("written before the interrupt\\n")
    print("interrupting", flush=True)
    raise KeyboardInterrupt
"""

STREAMS = """
    import io
    import sys

    import torch
    import torchleak

    model = torch.nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(40):
        loss = model(torch.randn(8, 4)).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        torchleak.mark("epoch", 1.0)  # any value: converted, never raised
        torchleak.mark(5)
        torchleak.mark(None, object())
    print("trained", flush=True)
    sys.stdout.close()  # the script closes its stdout and replaces its stderr
    sys.stderr = io.StringIO()
    sys.exit(4)
"""

# Reference cycles the script drops: the collector frees them on its own, and frees all of
# them when asked, under torchleak as under python.
CYCLES = """
    import gc
    import weakref


    class Early:
        def __init__(self):
            self.me = self


    gc.disable()  # what the script drops before `import torch` is garbage still at the import
    early = [weakref.ref(Early()) for _ in range(5_000)]
    import torch

    gc.enable()


    class Node:
        def __init__(self):
            self.me = self  # only the cyclic collector frees it
            self.payload = torch.zeros(256)


    refs = [weakref.ref(Node()) for _ in range(20_000)]
    print("alive before any gc.collect() under 2,000:", sum(r() is not None for r in refs) < 2000)
    gc.collect()
    print("alive after gc.collect():", sum(r() is not None for r in refs))
    print("made before import torch, alive:", sum(r() is not None for r in early))
    print("objects frozen before the script:", gc.get_freeze_count())
"""

LONG_LOOP = """
    import sys
    import time

    import torch

    model = torch.nn.Linear(16, 4)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    for step in range(int(sys.argv[1])):
        loss = model(torch.randn(8, 16)).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        time.sleep(float(sys.argv[2]))
    print("steps", step + 1)
    sys.exit(5)
"""


@prefetch
@weight(4)
def deleted_local(folder: Path) -> tuple[subprocess.CompletedProcess[str], Recorded]:
    return plain_then_recorded(folder, "deleted.py", DELETED_LOCAL, ("--quiet",))


def test_a_deleted_local_is_freed_at_the_next_boundary(runs: RunPool) -> None:
    plain, recorded = runs.get(deleted_local)
    assert plain.returncode == recorded.proc.returncode == 0, recorded.proc.stderr
    line = "deleted tensors alive at the next boundary: 0"
    assert line in plain.stdout and line in recorded.proc.stdout
    peak = {name: int(out.split("peak MiB")[1].split()[0])
            for name, out in (("plain", plain.stdout), ("torchleak", recorded.proc.stdout))}
    # The same peak: torchleak's own import and trace are tens of MiB at most.
    assert peak["torchleak"] <= peak["plain"] + 64, peak


def test_a_memory_limited_script_survives_under_torchleak_when_it_survives_plain(
        tmp_path: Path) -> None:
    cgroup = memory_cgroup(f"torchleak-test-{os.getpid()}", 600 * 1024 * 1024)
    if cgroup is None:
        pytest.skip("no writable cgroup v1 memory controller on this machine")
    script = write_script(tmp_path, "deleted.py", DELETED_LOCAL)
    enter = f"echo $$ > {cgroup}/cgroup.procs && exec \"$@\""
    try:
        results = {}
        for name, argv in (("plain", [sys.executable, script.name]),
                           ("torchleak", [sys.executable, "-m", "torchleak", "run", "--quiet",
                                          "--out", str(tmp_path / "run"), script.name])):
            proc = subprocess.run(["sh", "-c", enter, "sh", *argv], cwd=tmp_path, text=True,
                                  capture_output=True, timeout=300, env=child_env())
            results[name] = proc.returncode
    finally:
        cgroup.rmdir()
    if results["plain"] != 0:
        pytest.skip(f"the plain script does not survive this limit either: {results}")
    assert results["torchleak"] == 0, results


@prefetch
def environment(folder: Path) -> tuple[subprocess.CompletedProcess[str], Recorded]:
    script = write_script(folder, "env.py", ENVIRONMENT)
    env = {"OMP_NUM_THREADS": "2"}
    plain = run_python([script.name], cwd=folder, env=env)
    return plain, record(folder, script, options=("--quiet",))


def test_variables_set_before_the_scripts_import_of_torch_hold(runs: RunPool) -> None:
    plain, recorded = runs.get(environment)
    assert "threads 1" in plain.stdout
    assert recorded.proc.stdout == plain.stdout


# Objects the program keeps to its end are finalised at exit as under python: their
# ``__del__`` runs, with the script's globals still there, and a file it never closed
# (in the script, in a helper module of its own) keeps what it wrote (its modules frozen
# out of the collector's sight, or kept alive by a cache of ours, neither happened, or
# ``__del__`` ran with every global set to None). A script without steps, one that trains
# (the probes ran), one whose globals torch's own tables still hold at exit (a global
# hook: what python's teardown keeps or loses then, we keep or lose).
AT_EXIT = """
    import sys

    import torch

    import notes_helper


    class Closing:
        def __del__(self):
            sys.stdout.write(f"closed {NAME}\\n")


    NAME = "log"
    kept = Closing()
    notes = open("notes.txt", "w")  # never closed: python flushes it at exit
    notes.write("written, never closed\\n")
    notes_helper.LOG.write("the helper's, never closed\\n")


    def notes_file():
        return notes


    def on_forward(module, args, output):
        return None


    if "held" in sys.argv[1:]:
        torch.nn.modules.module.register_module_forward_hook(on_forward)
    if sys.argv[1:]:
        model = torch.nn.Linear(8, 2)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for _ in range(60):
            loss = model(torch.randn(4, 8)).sum()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    print("end of script")
"""
HELPER = """
    LOG = open("helper.txt", "w")  # a module of the program's own, never closed
"""


@pytest.mark.parametrize("args", [[], ["train"], ["train", "held"]],
                         ids=["no steps", "training", "held by torch"])
def test_objects_kept_to_the_end_are_finalised_at_exit_as_under_python(
        tmp_path: Path, args: list[str]) -> None:
    script = write_script(tmp_path, "at_exit.py", AT_EXIT)
    write_script(tmp_path, "notes_helper.py", HELPER)
    files = [tmp_path / "notes.txt", tmp_path / "helper.txt"]
    # Unbuffered, as at a terminal: what a finaliser writes to a block-buffered pipe that
    # late depends on CPython's order of teardown (python itself loses it in some runs).
    env = {"PYTHONUNBUFFERED": "1"}
    plain = run_python([script.name, *args], cwd=tmp_path, env=env)
    under_python = [path.read_text() for path in files]
    for path in files:
        path.unlink()
    recorded = run_torchleak(["run", "--quiet", "--out", str(tmp_path / "run"), script.name,
                              *args], cwd=tmp_path, env=env)
    assert [path.read_text() for path in files] == under_python  # nothing the program wrote lost
    assert recorded.stdout == plain.stdout
    assert recorded.stderr == plain.stderr == ""
    assert recorded.returncode == plain.returncode == 0
    if "held" not in args:  # torch's tables hold nothing of the script's: all finalised
        assert under_python == ["written, never closed\n", "the helper's, never closed\n"]
        assert plain.stdout == "end of script\nclosed log\n", plain.stderr
    else:  # python tears torch down first: the script's file and __del__ are lost to it
        assert under_python[1] == "the helper's, never closed\n"


@prefetch
def cycles(folder: Path) -> tuple[subprocess.CompletedProcess[str], Recorded]:
    return plain_then_recorded(folder, "cycles.py", CYCLES, ("--quiet",))


def test_the_scripts_cycles_are_collected_as_under_python(runs: RunPool) -> None:
    plain, recorded = runs.get(cycles)
    assert plain.returncode == recorded.proc.returncode == 0, recorded.proc.stderr
    for out in (plain.stdout, recorded.proc.stdout):
        assert "under 2,000: True" in out and "alive after gc.collect(): 0" in out, out
        # garbage made before `import torch` is collected, never frozen with torch's objects
        assert "made before import torch, alive: 0" in out, out
    # torchleak's start-up objects and torch's import objects (~166,000) are out of the
    # collector's sight, none the script made after its `import torch`: the 20,000 cycles
    # above were collected.
    frozen = {name: int(out.rsplit(":", 1)[1]) for name, out in
              (("plain", plain.stdout), ("torchleak", recorded.proc.stdout))}
    assert frozen["plain"] == 0 and frozen["torchleak"] > 50_000, frozen


@prefetch
def interrupted(folder: Path) -> tuple[subprocess.CompletedProcess[str], Recorded]:
    return plain_then_recorded(folder, "interrupted.py", INTERRUPTED)


def test_keyboard_interrupt_dies_by_sigint_after_the_trace_is_closed(runs: RunPool) -> None:
    plain, recorded = runs.get(interrupted)
    assert plain.returncode == -signal.SIGINT
    assert recorded.proc.returncode == -signal.SIGINT
    assert recorded.proc.stdout == plain.stdout == (
        "interrupting\nthe script's atexit handler ran\n")
    assert (recorded.out.parent / "interrupted.txt").read_text() == (
        "written before the interrupt\n")  # the recorded run's, written after python's
    assert "KeyboardInterrupt" in without_our_lines(recorded.proc.stderr)
    assert recorded.meta("status") == "crashed" and recorded.judgement("final") is not None


OWN_HANDLER = """
    import signal

    signal.signal(signal.SIGINT, lambda *_: None)  # the script's own Ctrl-C handler
    print("raising", flush=True)
    raise KeyboardInterrupt
"""


@pytest.mark.parametrize("sigint", ["ignored from the start", "as inherited"])
def test_an_uncaught_keyboard_interrupt_dies_by_sigint_whatever_the_handler(
        tmp_path: Path, sigint: str) -> None:
    # A shell's background job starts with SIGINT ignored; Python dies by SIGINT anyway.
    ignore = sigint == "ignored from the start"
    before = signal.signal(signal.SIGINT, signal.SIG_IGN) if ignore else None
    try:  # the children inherit the disposition
        plain, recorded = plain_then_recorded(tmp_path, "handler.py", OWN_HANDLER, ("--quiet",))
    finally:
        if ignore:
            signal.signal(signal.SIGINT, before)
    assert plain.returncode == recorded.proc.returncode == -signal.SIGINT, recorded.proc.stderr
    assert plain.stdout == recorded.proc.stdout == "raising\n"


@prefetch
def closed_streams(folder: Path) -> tuple[subprocess.CompletedProcess[str], Recorded]:
    return plain_then_recorded(folder, "streams.py", STREAMS)


def test_a_script_that_closes_its_streams_still_gets_its_verdict(runs: RunPool) -> None:
    plain, recorded = runs.get(closed_streams)
    assert plain.returncode == recorded.proc.returncode == 4
    assert recorded.proc.stdout == plain.stdout == "trained\n"
    err = recorded.proc.stderr
    assert "torchleak: no leak after 40 steps" in err or "torchleak: LEAK" in err, err
    assert "internal error" not in err and "Traceback" not in err and "Warning" not in err
    marks = recorded.rows("SELECT name, value FROM marks WHERE step = 1")
    assert ("epoch", "1.0") in marks and ("5", None) in marks
    assert any(name == "None" and value.startswith("<object") for name, value in marks)


def test_bad_options_are_refused_before_the_script_starts(tmp_path: Path) -> None:
    script = write_script(tmp_path, "env.py", ENVIRONMENT)
    cases = [(["--json", "/proc/no-such/out.json"], EXIT_CANTCREAT, "cannot write --json"),
             (["--limit", "twelve"], EXIT_USAGE, "--limit"),
             (["--budget", "0"], EXIT_USAGE, "budget"),
             (["--guard-at", "150"], EXIT_USAGE, "guard")]
    for options, code, words in cases:
        proc = run_torchleak(["run", *options, script.name], cwd=tmp_path)
        assert proc.returncode == code, (options, proc.stderr)
        assert proc.stdout == ""  # the script never started
        assert words in proc.stderr and proc.stderr.count("\n") == 1, proc.stderr


def test_two_runs_never_share_a_run_folder(tmp_path: Path) -> None:
    script = write_script(tmp_path, "env.py", ENVIRONMENT)
    first = run_torchleak(["run", "--quiet", "--out", "shared", script.name], cwd=tmp_path)
    second = run_torchleak(["run", "--quiet", "--out", "shared", script.name], cwd=tmp_path)
    assert first.returncode == 0 and second.returncode == EXIT_CANTCREAT
    assert "already holds a trace" in second.stderr and second.stdout == ""


@pytest.fixture
def tiny_disk(tmp_path: Path) -> Path:
    mount = tmp_path / "tiny"
    mount.mkdir()
    if shutil.which("mount") is None or subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mount)],
            capture_output=True).returncode != 0:
        pytest.skip("cannot mount a small tmpfs here (needs root)")
    yield mount
    subprocess.run(["umount", str(mount)], capture_output=True)


def test_a_full_disk_switches_recording_off_and_keeps_the_exit_code(tiny_disk: Path,
                                                                     tmp_path: Path) -> None:
    script = write_script(tmp_path, "long.py", LONG_LOOP)
    plain = run_python([script.name, "6000", "0"], cwd=tmp_path)
    proc = run_torchleak(["run", "--out", str(tiny_disk / "run"), script.name, "6000", "0"],
                         cwd=tmp_path, timeout=300)
    assert plain.returncode == proc.returncode == 5
    assert proc.stdout == plain.stdout == "steps 6000\n"
    assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr
    assert proc.stderr.count("recording switched off") == 1, proc.stderr


def test_a_trace_locked_by_another_process_loses_no_step(tmp_path: Path) -> None:
    """Another process holds the trace's write lock for 5 s: rows wait, then land."""
    script = write_script(tmp_path, "long.py", LONG_LOOP)
    out = tmp_path / "run"
    proc = subprocess.Popen([sys.executable, "-m", "torchleak", "run", "--quiet", "--out",
                             str(out), script.name, "900", "0.01"], cwd=tmp_path,
                            env=child_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        deadline = time.monotonic() + 60
        while not (out / "trace.sqlite").exists() or _steps(out) < 50:
            assert time.monotonic() < deadline and proc.poll() is None, "no trace appeared"
            time.sleep(0.1)
        blocker = sqlite3.connect(out / "trace.sqlite", timeout=10)
        blocker.execute("BEGIN EXCLUSIVE")
        time.sleep(5)
        blocker.rollback()
        blocker.close()
        stdout, stderr = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == 5 and stdout == "steps 900\n", stderr
    assert _steps(out) == 900  # every step, none lost while the lock was held
    assert "Traceback" not in stderr


def _steps(out: Path) -> int:
    conn = sqlite3.connect(f"file:{out / 'trace.sqlite'}?mode=ro", uri=True, timeout=10)
    try:
        return int(conn.execute("SELECT COUNT(*) FROM steps").fetchone()[0])
    except sqlite3.Error:
        return 0
    finally:
        conn.close()


COMPILED = """
    import torch
    from torch._dynamo.utils import counters

    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)


    @torch.compile
    def train_step(x):
        loss = model(x).pow(2).mean()
        loss.backward()
        optimizer.step()  # the step hook runs inside the compiled region
        optimizer.zero_grad()
        model.eval()
        model.train()
        return loss


    for step in range(6):
        loss = train_step(torch.randn(8, 16))
    print("graphs", counters["stats"]["unique_graphs"])
    print("breaks", sum(counters["graph_break"].values()))
    print("loss", round(loss.item(), 4))
"""


@prefetch
@weight(4)
def compiled(folder: Path) -> tuple[subprocess.CompletedProcess[str], Recorded]:
    script = write_script(folder, "compiled.py", COMPILED)
    return (run_python([script.name], cwd=folder, timeout=300),
            record(folder, script, options=("--quiet",)))


def test_torch_compile_sees_nothing_of_torchleak(runs: RunPool) -> None:
    plain, recorded = runs.get(compiled)
    assert plain.returncode == recorded.proc.returncode == 0, recorded.proc.stderr[-3000:]
    assert recorded.proc.stdout == plain.stdout  # same graphs, same breaks, same loss
    assert "torchleak" not in recorded.proc.stderr  # no compiler warning about our code


# Two training functions whose own view of their locals must be what it is without
# torchleak: a dict taken by ``locals()`` before the loop keeps its names (no ``loss``
# appears in it), and a name bound by ``exec`` stays readable after the walks.
LOCALS_KEPT = """
    import torch

    torch.set_num_threads(1)


    def steps(model, optimizer, grown):
        for _ in range(40):
            loss = model(torch.randn(4, 8)).pow(2).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            grown.append(torch.zeros(4096))


    def held_locals():
        model = torch.nn.Linear(8, 8)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
        grown = []
        early = locals()
        names = sorted(early)
        for _ in range(40):
            loss = model(torch.randn(4, 8)).pow(2).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            grown.append(torch.zeros(4096))
        print("early dict:", sorted(early) == names, sorted(set(early) - set(names)))


    def exec_bound():
        model = torch.nn.Linear(8, 8)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
        grown = []
        exec("bound_by_exec = 41")
        for _ in range(40):
            loss = model(torch.randn(4, 8)).pow(2).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            grown.append(torch.zeros(4096))
        try:
            print("exec name:", eval("bound_by_exec"))
        except NameError as err:
            print("exec name:", err)


    def waits_for_a_training_thread():
        import threading

        model = torch.nn.Linear(8, 8)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
        grown = []
        early = locals()
        names = sorted(early)
        worker = threading.Thread(target=steps, args=(model, optimizer, grown))
        worker.start()
        worker.join()
        print("waiting thread's dict:", sorted(early) == names, sorted(set(early) - set(names)))


    held_locals()
    exec_bound()
    waits_for_a_training_thread()
"""


def test_the_walk_leaves_a_training_functions_locals_as_they_were(workdir: Path) -> None:
    script = write_script(workdir, "locals_kept.py", LOCALS_KEPT)
    plain = run_python([script.name], cwd=workdir)
    recorded = record(workdir, script, options=("--quiet",))
    assert plain.returncode == recorded.proc.returncode == 0, recorded.proc.stderr
    assert plain.stdout == ("early dict: True []\nexec name: 41\n"
                            "waiting thread's dict: True []\n"), plain.stdout
    assert recorded.proc.stdout == plain.stdout
    # The walk did read both functions' locals: their growing list is a holder.
    walked = {h for (h,) in recorded.rows("SELECT DISTINCT holder FROM holders")}
    assert {"held_locals().grown", "exec_bound().grown"} <= walked, sorted(walked)


def test_a_stopped_recording_keeps_nothing_alive_after_a_fork(tmp_path: Path) -> None:
    """Recordings started and stopped in one process (a test suite with @no_leak on each
    test) are freed once stopped: a fork handler is process-wide and cannot be removed."""
    import gc
    import weakref

    import torch

    from torchleak.live.engine import Monitor, MonitorOptions

    recorders = []
    for index in range(3):
        monitor = Monitor(MonitorOptions(out=tmp_path / f"run{index}", name="t", quiet=True))
        monitor.start()
        model = torch.nn.Linear(4, 4)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for _ in range(5):
            model(torch.randn(2, 4)).sum().backward()
            optimizer.step()
            optimizer.zero_grad()
        monitor.stop("finished", 0, analyse=False)
        recorders.append(weakref.ref(monitor.recorder))
        del monitor
    pid = os.fork()  # the handlers run: a stopped recording's sampler is not woken to life
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    gc.collect()
    assert [r() for r in recorders] == [None, None, None]



def test_a_holder_walk_keeps_no_class_of_the_program_alive(tmp_path: Path) -> None:
    """A class the walk met (a model's) is freed with the program's last reference to it:
    kept by a cache of ours, it kept its module's globals alive to the end."""
    import gc
    import weakref

    import torch

    from torchleak.live.engine import Monitor, MonitorOptions

    monitor = Monitor(MonitorOptions(out=tmp_path / "run", name="t", quiet=True))
    monitor.start()

    class Net(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.layer = torch.nn.Linear(4, 4)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.layer(x)

    model = Net()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(5):
        model(torch.randn(2, 4)).sum().backward()
        optimizer.step()
        optimizer.zero_grad()
    walked = monitor.recorder.walk_now(sys._getframe())
    monitor.stop("finished", 0, analyse=False)
    assert any(".optimizer." in sample.holder for sample in walked)  # it walked this frame
    net = weakref.ref(Net)
    del Net, model, optimizer, walked, monitor
    gc.collect()
    assert net() is None


# The script stays `__main__` to the end, as under python: the program's atexit handlers
# read it there, and its globals (a file never closed) still live while they run. Without
# torch (nothing else keeps the module) and with it.
MAIN_AT_EXIT = """
    import atexit
    import os
    import sys

    if sys.argv[1:] == ["torch"]:
        import torch
    marker = 42
    notes = open("main_at_exit.txt", "w")
    notes.write("written, never closed\\n")


    def report() -> None:
        main = sys.modules["__main__"]
        print("marker:", getattr(main, "marker", None), "| file still open:",
              not main.__dict__.get("notes", notes).closed,
              "| bytes on disk:", os.path.getsize("main_at_exit.txt"))


    atexit.register(report)
"""


@pytest.mark.parametrize("as_module", [False, True], ids=["script", "-m module"])
@pytest.mark.parametrize("with_torch", [False, True], ids=["no torch", "torch"])
def test_the_script_is_main_in_its_atexit_handlers_as_under_python(
        tmp_path: Path, with_torch: bool, as_module: bool) -> None:
    script = write_script(tmp_path, "main_at_exit.py", MAIN_AT_EXIT)
    args = ["torch"] if with_torch else []
    target = ["-m", script.stem] if as_module else [script.name]
    plain = run_python([*target, *args], cwd=tmp_path)
    recorded = run_torchleak(["run", "--quiet", "--out", str(tmp_path / "run"), *target,
                              *args], cwd=tmp_path)
    assert plain.stdout == "marker: 42 | file still open: True | bytes on disk: 0\n", \
        plain.stderr
    assert recorded.stdout == plain.stdout, recorded.stderr
    assert (tmp_path / "main_at_exit.txt").read_text() == "written, never closed\n"
