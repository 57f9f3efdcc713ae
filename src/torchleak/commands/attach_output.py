"""How ``torchleak attach`` shows a run's replies: the same words and tables as the report.

Every reply is made inert before it is shown (``views.inert``): what the run sends back,
an eval's output included, reaches the terminal with its control characters escaped.
A walk's holders are shown with their first sample in the trace (``length a -> b``, as
the report's holder table), and the live detector's findings as the end-of-run summary
shows findings. A snapshot reads back the census and walk it wrote.
"""

from __future__ import annotations

import sqlite3
import sys
from typing import Any

from torchleak.commands.attach_client import AttachTarget
from torchleak.errors import AttachRefused, AttachUnavailable, TorchleakError
from torchleak.report import Report
from torchleak.units import format_bytes, format_count
from torchleak.views.inert import inert_input
from torchleak.views.summary import finding_lines
from torchleak.views.tabular import format_table


@inert_input
def check(reply: dict[str, Any], ran: bool = False) -> dict[str, Any]:
    """The reply of a command that succeeded (``ran``: or at least ran, like code that
    raised); refusals, timeouts and failures become one-line errors."""
    state = reply.get("state")
    if reply.get("ok") or (ran and state == "done"):
        return reply
    error = str(reply.get("error") or f"the run answered {state!r}")
    if state == "refused":
        raise AttachRefused(error)
    if state == "error":
        raise TorchleakError(error, exit_code=64)
    raise AttachUnavailable(error)


@inert_input
def show_eval(reply: dict[str, Any]) -> int:
    """stdout, stderr, the value and any traceback, each where Python would put it."""
    check(reply, ran=True)
    if reply.get("stdout"):
        sys.stdout.write(reply["stdout"])
    if reply.get("result") is not None:
        sys.stdout.write(f"{reply['result']}\n")
    sys.stdout.flush()
    if reply.get("stderr"):
        sys.stderr.write(reply["stderr"])
    if reply.get("error"):
        sys.stderr.write(reply["error"])
        return 1
    return 0


@inert_input
def walk_text(reply: dict[str, Any], target: AttachTarget) -> str:
    check(reply)
    holders = reply.get("holders") or []
    lines = [f"holders at step {reply.get('step', 0):,} (walked {reply.get('walked', 0):,} in "
             f"{reply.get('walk_ms', 0):.3g} ms), largest first:"]
    first = _first_samples(target, [h["holder"] for h in holders])
    rows = []
    for h in holders:
        was = first.get(h["holder"])
        kind = f"{h['kind']} ({h['type_name']})" if h.get("type_name") else h["kind"]
        length, size = format_count(h["length"]), format_bytes(h["bytes"])
        since = "now"
        if was is not None and was[0] < reply.get("step", 0):
            length = f"{format_count(was[1])} -> {length}"
            size = f"{format_bytes(was[2])} -> {size}"
            since = f"step {was[0]:,}"
        rows.append([h["holder"], kind, length, size, since])
    lines.append(format_table(["holder", "kind", "length", "own size", "since"], rows)
                 .rstrip("\n") if rows else "  (no holders found)")
    lines.extend(_findings_lines(reply))
    return "\n".join(lines)


def _findings_lines(reply: dict[str, Any]) -> list[str]:
    report = Report.from_dict({"verdict": reply.get("verdict") or "inconclusive",
                               "steps": reply.get("as_of_step") or 0,
                               "findings": reply.get("findings") or []})
    if report is None or reply.get("verdict") is None:
        return ["live findings: none yet (the live detector has not judged this run yet)"]
    lines = [f"live findings as of step {report.steps:,}: {reply.get('reason') or report.verdict}"]
    for finding in report.findings:
        lines.extend(finding_lines(finding))
    return lines


@inert_input
def snapshot_text(reply: dict[str, Any], target: AttachTarget) -> str:
    check(reply)
    step = int(reply.get("step") or 0)
    lines = [f"snapshot at step {step:,} written to {target.trace}"]
    census, walk = _snapshot_rows(target, step)
    if census:
        tensors, tensor_bytes, nodes, objects = census
        lines.append(f"  census: {format_count(tensors)} tensors ({format_bytes(tensor_bytes)}),"
                     f" {format_count(nodes)} autograd nodes, {format_count(objects)} objects")
    if walk:
        lines.append(f"  holder walk: {format_count(walk[0])} holders in {walk[1]:.3g} ms")
    if reply.get("cuda_error"):
        lines.append(f"  {reply['cuda_error']}")
    if reply.get("cuda_snapshot"):
        lines.append(f"  CUDA allocator snapshot: {reply['cuda_snapshot']} (open it at "
                     "https://pytorch.org/memory_viz)")
    return "\n".join(lines)


@inert_input
def cleanup_text(reply: dict[str, Any]) -> str:
    check(reply)
    return f"cleanup at step {reply.get('step', 0):,}:\n" + "\n".join(
        f"  {line}" for line in str(reply.get("text") or "").splitlines())


@inert_input
def status_text(hello: dict[str, Any]) -> str:
    rank = f", rank {hello['rank']}" if hello.get("rank") is not None else ""
    mode = "" if hello.get("mode") == "full" else "; eval and cleanup are off in this run"
    return (f"{hello.get('run')} (pid {hello.get('pid')}{rank}) at step "
            f"{hello.get('step', 0):,}{mode}")


def _query(target: AttachTarget, sql: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
    """Rows from the run's trace (read-only); none when it cannot be read."""
    from torchleak.trace.reader import open_trace

    try:
        with open_trace(target.trace) as trace:
            return trace.conn.execute(sql, params).fetchall()
    except (TorchleakError, sqlite3.Error, OSError):
        return []


def _first_samples(target: AttachTarget, paths: list[str]) -> dict[str, tuple[int, int, int]]:
    if not paths:
        return {}
    marks = ",".join("?" * len(paths))
    rows = _query(target, f"SELECT holder, MIN(step), length, bytes FROM holders WHERE "
                          f"holder IN ({marks}) GROUP BY holder", tuple(paths))
    return {r[0]: (int(r[1]), int(r[2] or 0), int(r[3] or 0)) for r in rows}


def _snapshot_rows(target: AttachTarget, step: int) -> tuple[Any, Any]:
    census = _query(target, "SELECT tensors, tensor_bytes, graph_nodes, gc_objects FROM census "
                            "WHERE step = ?", (step,))
    walk = _query(target, "SELECT holders, duration_ms FROM holder_walks WHERE step = ? AND "
                          "reason = 'attach' ORDER BY rowid DESC LIMIT 1", (step,))
    return (census[0] if census else None), (walk[0] if walk else None)
