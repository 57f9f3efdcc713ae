"""torchleak's global module hooks lifted out of torch's tables for an export and put
back exactly: the same keys in the same order, the program's own hooks untouched."""

from __future__ import annotations

import re
from pathlib import Path

import torch
from recordkit import run_python, run_torchleak, write_script
from torch.nn.modules import module as nn_module

from torchleak.record.export_lift import ExportLift


def _noop(module: object, args: object) -> None:
    return None


def test_lifted_hooks_come_back_under_their_keys_in_their_order() -> None:
    table = nn_module._global_forward_pre_hooks
    theirs_before = nn_module.register_module_forward_pre_hook(_noop)
    ours = nn_module.register_module_forward_pre_hook(_noop)
    theirs_after = nn_module.register_module_forward_pre_hook(_noop)
    try:
        as_it_was = list(table.items())
        lift = ExportLift(lambda: [ours])
        with lift.lifted():
            assert ours.id not in table
            assert theirs_before.id in table and theirs_after.id in table
        assert list(table.items()) == as_it_was
    finally:
        for handle in (theirs_before, ours, theirs_after):
            handle.remove()


def test_the_export_tracer_is_wrapped_while_installed_and_torchs_own_after() -> None:
    import torch.export._trace as trace

    original = trace._export
    lift = ExportLift(lambda: [])
    lift.install()
    try:
        assert trace._export is not original
        assert trace._export.__wrapped__ is original  # type: ignore[attr-defined]
        assert torch.export.export is original_export  # torch's own entry point untouched
    finally:
        lift.uninstall()
    assert trace._export is original


original_export = torch.export.export

# ``export`` imported before recording begins, when torch has not loaded its export tracer
# yet: a strict export inside the recording gives the program the same graph as without.
EXPORT_IMPORTED_FIRST = """
    import contextlib
    import gc
    import sys

    import torch
    from torch.export import export

    import torchleak

    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU())
    recorded = sys.argv[1] == "recorded"
    with torchleak.monitor(out="run", quiet=True) if recorded else contextlib.nullcontext():
        print("tracer loaded before:", "torch.export._trace" in sys.modules)
        program = export(model, (torch.randn(2, 4),), strict=True)
        print(sorted({str(n.target) for n in program.graph.nodes if n.op == "call_function"}))
        with torch.no_grad():
            for _ in range(20):
                model(torch.randn(2, 4))
    print("finders left:", sum("WrapOnLoad" in type(f).__name__ for f in sys.meta_path))
    print("tracer is torch's:", "torchleak" not in torch.export._trace._export.__code__.co_filename)
    # torch's loader as it was, and nothing of the recording kept alive by it.
    print("loader patched:", "exec_module" in vars(torch.export._trace.__spec__.loader))
    gc.collect()
    print("recorders alive:", sum(type(o).__name__ == "Recorder" for o in gc.get_objects()))
"""


def _plain_then_monitored(folder: Path, name: str, source: str) -> str:
    """Run ``source`` (its argument: ``plain`` or ``recorded``, under an in-process
    monitor) both ways; both succeed with the same output, which is returned."""
    script = write_script(folder, name, source)
    plain = run_python([script.name, "plain"], cwd=folder, timeout=300)
    recorded = run_python([script.name, "recorded"], cwd=folder, timeout=300)
    assert plain.returncode == 0, plain.stderr[-3000:]
    assert recorded.returncode == 0, recorded.stderr[-3000:]
    assert recorded.stdout == plain.stdout
    return recorded.stdout


def test_an_export_imported_before_recording_began_sees_no_torchleak(tmp_path: Path) -> None:
    out = _plain_then_monitored(tmp_path, "export_first.py", EXPORT_IMPORTED_FIRST)
    assert "tracer loaded before: False" in out  # the path through the finder
    assert "aten.relu.default" in out
    assert "finders left: 0" in out and "tracer is torch's: True" in out
    assert "loader patched: False" in out and "recorders alive: 0" in out


# A module that took its own name for the tracer as it loaded (``draft_export``'s), loaded
# before recording began; then, with our hooks kept since an export made a graph, training
# steps: the hooks go at the first optimizer step as under no export (an export's graphs
# saw no hook of ours), and a compiled module warns of no global hook under ``-W error``.
DRAFT_FIRST = """
    import contextlib
    import sys
    import warnings

    import torch

    import torchleak

    model = torch.nn.Linear(4, 3)
    x = torch.randn(2, 4)
    torch.export.draft_export(model, (x,), strict=True)
    recorded = sys.argv[1] == "recorded"
    with torchleak.monitor(out="run", quiet=True) if recorded else contextlib.nullcontext():
        torch.export.draft_export(model, (x,), strict=True)
        torch.export.export(model, (x,), strict=True)
        print("drafted and exported")
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for _ in range(3):
            model(x).sum().backward()
            optimizer.step()
            optimizer.zero_grad()
        print("global hooks:", len(torch.nn.modules.module._global_forward_hooks))
        warnings.simplefilter("error")
        compiled = torch.compile(torch.nn.Linear(4, 3), backend="eager")
        print("compiled:", tuple(compiled(x).shape))
    draft = sys.modules["torch.export._draft_export"]._export
    print("draft's tracer is torch's:", "torchleak" not in draft.__code__.co_filename)
"""


def test_a_tracer_bound_before_recording_and_an_exports_graphs_see_no_torchleak(
        tmp_path: Path) -> None:
    out = _plain_then_monitored(tmp_path, "draft_first.py", DRAFT_FIRST)
    assert "global hooks: 0" in out and "compiled: (2, 3)" in out
    assert "draft's tracer is torch's: True" in out


# An export that fails: under ``torchleak run`` the error is printed as python prints it,
# without a frame of the wrapper it passed through.
FAILING_EXPORT = """
    import torch

    torch.export.export(torch.nn.Linear(4, 3), (torch.randn(2, 5),), strict=True)
"""


def _traceback(stderr: str) -> list[str]:
    """The traceback's lines, without torch's own timestamped log lines."""
    return [re.sub(r"0x[0-9a-f]+", "0x", line) for line in stderr.splitlines()
            if not re.match(r"[EWI]\d{4} ", line)]


def test_a_failing_export_prints_the_traceback_python_prints(tmp_path: Path) -> None:
    script = write_script(tmp_path, "failing_export.py", FAILING_EXPORT)
    plain = run_python([script.name], cwd=tmp_path, timeout=300)
    recorded = run_torchleak(["run", "--quiet", "--out", str(tmp_path / "run"), script.name],
                             cwd=tmp_path, timeout=300)
    assert plain.returncode == recorded.returncode == 1
    assert "Traceback" in plain.stderr and "export_lift" not in recorded.stderr
    assert _traceback(recorded.stderr) == _traceback(plain.stderr)
