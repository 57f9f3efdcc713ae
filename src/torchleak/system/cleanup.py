"""``torchleak.cleanup()``: free what can be freed now and say what each step freed.

Three steps, each measured on its own: a full ``gc.collect()`` (objects kept only by
reference cycles), CUDA ``empty_cache()`` + ``ipc_collect()`` (blocks the caching
allocator keeps; only when this process already uses CUDA), and glibc
``malloc_trim(0)`` (free heap pages the allocator keeps). When all three free almost
nothing, what the process holds is in use by live objects: cleanup cannot help, and the
holder walk names the objects. Never raises: a failing step is reported as failed.
"""

from __future__ import annotations

import gc
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TextIO

from torchleak.system.allocator import detect_allocator, malloc_trim
from torchleak.units import format_bytes
from torchleak.system.procmem import MemoryNow, cuda_in_use, memory_now

# Below this (USS and CUDA together) a cleanup "freed almost nothing".
NOTHING_FREED_BYTES = 1 << 20
PREFIX = "torchleak cleanup:"


class _Freed:
    """What went between two measurements (positive: freed)."""

    before: MemoryNow
    after: MemoryNow

    @property
    def freed_uss(self) -> int | None:
        return _drop(self.before.uss, self.after.uss)

    @property
    def freed_rss(self) -> int | None:
        return _drop(self.before.rss, self.after.rss)

    @property
    def freed_cuda(self) -> int | None:
        return _drop(self.before.cuda_reserved, self.after.cuda_reserved)


@dataclass(frozen=True)
class CleanupStep(_Freed):
    name: str
    status: str  # done | skipped | failed
    detail: str  # what it did, or why it was skipped or failed
    before: MemoryNow
    after: MemoryNow
    seconds: float

    def to_dict(self) -> dict[str, Any]:
        return {"step": self.name, "status": self.status, "detail": self.detail,
                "freed_uss": self.freed_uss, "freed_rss": self.freed_rss,
                "freed_cuda_reserved": self.freed_cuda, "seconds": round(self.seconds, 6)}


@dataclass(frozen=True)
class CleanupResult(_Freed):
    steps: list[CleanupStep]
    before: MemoryNow
    after: MemoryNow
    explanation: str | None = None  # from the ``explain`` callback, when it ran
    lines: list[str] = field(default_factory=list)

    @property
    def freed_bytes(self) -> int:
        """USS and CUDA reserved freed together (what the user gets back)."""
        return max(0, self.freed_uss or 0) + max(0, self.freed_cuda or 0)

    @property
    def freed_nothing(self) -> bool:
        return self.freed_bytes < NOTHING_FREED_BYTES

    def to_dict(self) -> dict[str, Any]:
        return {"steps": [s.to_dict() for s in self.steps], "before": self.before.to_dict(),
                "after": self.after.to_dict(), "freed_uss": self.freed_uss,
                "freed_rss": self.freed_rss, "freed_cuda_reserved": self.freed_cuda,
                "freed_nothing": self.freed_nothing, "explanation": self.explanation}

    def __str__(self) -> str:
        return "\n".join(self.lines)


def _drop(before: int | None, after: int | None) -> int | None:
    return before - after if before is not None and after is not None else None


def _collect() -> str:
    found = gc.collect()
    return f"{found:,} unreachable objects"


def _cuda() -> str:
    torch = sys.modules["torch"]
    torch.cuda.empty_cache()
    torch.cuda.ipc_collect()
    return "cached blocks released"


def _trim() -> str:
    malloc_trim(0)
    return ""  # its return value says whether a single page went back: the figures say more


def _cuda_skip() -> str | None:
    if "torch" not in sys.modules:
        return "torch not imported"
    return None if cuda_in_use() else "CUDA not initialised in this process"


def _trim_skip() -> str | None:
    allocator = detect_allocator()
    return None if allocator.is_glibc else f"the malloc here is {allocator.name}, not glibc"


_STEPS: tuple[tuple[str, Callable[[], str], Callable[[], str | None]], ...] = (
    ("gc.collect()", _collect, lambda: None),
    ("torch.cuda.empty_cache()", _cuda, _cuda_skip),
    ("malloc_trim(0)", _trim, _trim_skip),
)


def _run_step(name: str, action: Callable[[], str], skip: Callable[[], str | None]) -> CleanupStep:
    before = _safe_memory()
    start = time.perf_counter()
    try:
        reason = skip()
        status, detail = ("skipped", reason) if reason else ("done", action())
    except Exception as err:  # noqa: BLE001 - a failing step is reported, never raised
        status, detail = "failed", f"{type(err).__name__}: {err}"
    seconds = time.perf_counter() - start
    after = before if status == "skipped" else _safe_memory()
    return CleanupStep(name, status, detail, before, after, seconds)


def _safe_memory() -> MemoryNow:
    try:
        return memory_now()
    except Exception:  # noqa: BLE001 - measurement is optional
        return MemoryNow(None, None, None)


def _freed_text(uss: int | None, cuda: int | None) -> str:
    if uss is None and cuda is None:
        return "freed ? (memory unreadable here)"
    parts = [f"{format_bytes(uss)} USS" if uss is not None and uss >= 64 << 10 else None,
             f"{format_bytes(cuda)} CUDA reserved" if cuda is not None and cuda >= 64 << 10
             else None]
    freed = ", ".join(p for p in parts if p)
    return f"freed {freed}" if freed else "freed nothing"


def _step_line(step: CleanupStep) -> str:
    if step.status != "done":
        return f"{PREFIX} {step.name:26} {step.status}: {step.detail}"
    detail = f"{step.detail}, " if step.detail else ""
    return (f"{PREFIX} {step.name:26} {_freed_text(step.freed_uss, step.freed_cuda)}"
            f" ({detail}{step.seconds * 1000:.0f} ms)")


def _held_line(after: MemoryNow, explained: bool) -> str:
    held = [f"USS {format_bytes(after.uss)}" if after.uss is not None else None,
            f"CUDA reserved {format_bytes(after.cuda_reserved)}"
            if after.cuda_reserved is not None else None]
    what = ", ".join(h for h in held if h) or "its memory"
    who = ("what holds it:" if explained else
           "the holder walk names them (run the script under `torchleak run`)")
    return (f"{PREFIX} freed almost nothing: what this process holds ({what}) is in use "
            f"by live objects, not waiting for gc or the allocator; {who}")


def _render(result: CleanupResult) -> list[str]:
    lines = [_step_line(step) for step in result.steps]
    total = _freed_text(result.freed_uss, result.freed_cuda)
    rss = ""
    if result.before.rss is not None and result.after.rss is not None:
        rss = f"; RSS {format_bytes(result.before.rss)} -> {format_bytes(result.after.rss)}"
    lines.append(f"{PREFIX} {'total':26} {total}{rss}")
    if result.freed_nothing:
        lines.append(_held_line(result.after, bool(result.explanation)))
    if result.explanation:
        lines += [f"{PREFIX} {line}" for line in result.explanation.splitlines()]
    return lines


def _explain(explain: Callable[[], str | None] | None) -> str | None:
    if explain is None:
        return None
    try:
        text = explain()
    except Exception as err:  # noqa: BLE001 - the explanation is optional
        return f"(could not name the holders: {type(err).__name__}: {err})"
    return text.strip() if text else None


def cleanup(verbose: bool = True, explain: Callable[[], str | None] | None = None,
            stream: TextIO | None = None) -> CleanupResult:
    """Free what can be freed now: gc, CUDA cache (when in use), glibc heap slack.

    Returns what each step freed; with ``verbose`` also prints one line per step and a
    total on ``stream`` (stderr). When almost nothing was freed, ``explain`` (if given)
    is called and its text, e.g. a holder walk naming what holds the memory, is added.
    """
    before = _safe_memory()
    steps = [_run_step(name, action, skip) for name, action, skip in _STEPS]
    after = _safe_memory()
    draft = CleanupResult(steps, before, after)
    explanation = _explain(explain) if draft.freed_nothing else None
    result = CleanupResult(steps, before, after, explanation)
    result.lines.extend(_render(result))
    if verbose:
        try:
            print(str(result), file=stream or sys.stderr, flush=True)
        except (OSError, ValueError):
            pass  # a closed stream must not break the caller
    return result
