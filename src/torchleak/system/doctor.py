"""``torchleak doctor [script.py]``: check this machine and a training script before a
run, and say what to change, each with why.

The machine checks read RAM, swap, the cgroup limit and ``memory.high``, ``/dev/shm``,
``ulimit -n``/``-u``, ``vm.overcommit_memory``, the malloc and its ``MALLOC_*``
settings, the GPUs (nvidia-smi or NVML, never a CUDA context), the CUDA allocator
settings and the torch/CUDA/cuDNN versions. With a script: its static check (passed in
by the caller) and its DataLoader settings against the machine, with the changes to
paste.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from torchleak.errors import BadInput, InputNotFound
from torchleak.system.allocator import detect_allocator
from torchleak.system.doctor_checks import MACHINE_CHECKS, check_shm, torch_facts
from torchleak.system.doctor_model import Check, DoctorReport, Machine, Proposal
from torchleak.system.doctor_script import script_checks, shm_need
from torchleak.system.gpu import gpu_inventory
from torchleak.system.limits import cgroup_memory, machine_memory
from torchleak.system.script_scan import ScriptFacts, scan_script

StaticCheck = Callable[[str, str], Iterable[Any]]


def gather_machine(with_torch: bool = True) -> Machine:
    """The machine's facts; ``with_torch`` imports torch for its versions."""
    facts = torch_facts() if with_torch else {"version": "not checked", "cuda": None}
    return Machine(machine_memory(), cgroup_memory(), gpu_inventory(), facts)


def read_script(path: Path) -> str:
    if not path.exists():
        raise InputNotFound(f"no such script: {path}")
    if path.is_dir():
        raise BadInput(f"{path} is a folder: give the training script (a .py file)")
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise BadInput(f"{path} is not UTF-8 text: give the training script (a .py file)"
                       ) from None
    except OSError as err:
        raise InputNotFound(f"cannot read {path}: {err.strerror}") from None


def _diagnostic(d: Any) -> dict[str, Any]:
    return {"code": getattr(d, "code", ""), "line": getattr(d, "line", 0),
            "col": getattr(d, "col", 0), "message": getattr(d, "message", str(d))}


def _static_check(static_check: StaticCheck, text: str, name: str) -> tuple[Check, list]:
    try:
        found = [_diagnostic(d) for d in static_check(text, name)]
    except Exception as err:  # noqa: BLE001 - the checker failing is a finding, not a crash
        return Check(f"static check ({name})", "warn", f"could not run: {err}",
                     "leak patterns in the source", ""), []
    value = "no leak patterns found" if not found else f"{len(found)} finding" + (
        "s" if len(found) != 1 else "") + ": " + ", ".join(
        f"{d['code']} line {d['line']}" for d in found)
    return Check(f"static check ({name})", "warn" if found else "ok", value,
                 "leak patterns in the source grow memory every step",
                 f"torchleak check {name} (--fix applies the safe rewrites)" if found else "",
                 {"diagnostics": found}), found


def _safe_proposal(script: str) -> Proposal | None:
    if not detect_allocator().is_glibc:
        return None
    return Proposal("shell", f"torchleak run --safe {script}",
                    "the heap pages glibc keeps behind small live objects (measured: "
                    "0.1-0.5 MB per step in loops that keep a small tensor per step)",
                    "it changes only allocator settings, nothing the program computes")


def run_doctor(script: Path | None = None, static_check: StaticCheck | None = None,
               with_torch: bool = True) -> DoctorReport:
    """Check the machine (and ``script``). ``static_check(text, filename)`` returns the
    script's leak diagnostics (``torchleak.check.check_source``)."""
    text = read_script(script) if script is not None else None
    machine = gather_machine(with_torch)
    checks = [c for fn in MACHINE_CHECKS if (c := fn(machine)) is not None]
    facts = scan_script(text, str(script)) if text is not None and script else None
    need = shm_need(facts) if facts is not None else None
    shm = check_shm(machine, need.bytes if need else None, need.text if need else "")
    checks.insert(next(i for i, c in enumerate(checks) if c.name.startswith("open files")),
                  shm)
    report = DoctorReport(checks)
    if facts is not None and text is not None:
        _add_script(report, facts, machine, text, static_check)
    # Without a script, a placeholder the user recognises: never a file they may not have.
    safe = _safe_proposal(str(script) if script else "<your_script.py>")
    if safe is not None:
        report.proposals.append(safe)
    return report


def _add_script(report: DoctorReport, facts: ScriptFacts, machine: Machine, text: str,
                static_check: StaticCheck | None) -> None:
    if static_check is not None and facts.syntax_error is None:
        check, report.diagnostics = _static_check(static_check, text, facts.path)
        report.checks.append(check)
    checks, proposals = script_checks(facts, machine)
    report.checks += checks
    report.proposals += proposals
    report.script = facts.to_dict()
