"""Words shared by the text and HTML renderers: the verdict line, finding facts, metadata."""

from __future__ import annotations

from typing import Any

from torchleak.report import Finding
from torchleak.views.model import RunView
from torchleak.views.units import format_bytes, format_count, format_duration, format_time

VERDICT_TITLES = {
    "leak": "Memory leak",
    "no_leak": "No leak found",
    "inconclusive": "Inconclusive",
    "unknown": "Not analysed",
    "running": "Running",
}


def verdict_parts(view: RunView) -> tuple[str, str]:
    """The banner's title and its one-sentence explanation."""
    title = VERDICT_TITLES.get(view.verdict, view.verdict)
    serious = sum(1 for f in view.findings if f.severity in ("high", "medium"))
    minor = len(view.findings) - serious
    if view.verdict == "leak":
        title += f": {serious} finding{'s' if serious != 1 else ''}"
        if minor:
            title += f" (+{minor} minor)"
    reason = view.report.reason if view.report else ""
    if not reason and view.report is None:
        reason = "no findings available; the signals are drawn straight from the trace"
    if view.state.running:
        reason = f"Run in progress: snapshot at step {view.state.steps:,}. {reason}".strip()
    elif view.state.status == "killed":
        reason = f"The run was killed at step {view.state.steps:,}. {reason}".strip()
    return title, reason


def finding_facts(finding: Finding) -> list[tuple[str, str]]:
    facts: list[tuple[str, str]] = []
    if finding.per_epoch and finding.bytes_per_epoch is not None:
        facts.append(("rate", f"{format_bytes(finding.bytes_per_epoch, signed=True)}/epoch"))
    elif finding.bytes_per_step is not None:
        facts.append(("rate", f"{format_bytes(finding.bytes_per_step, signed=True)}/step"))
    if finding.objects_per_step is not None:
        facts.append(("objects", f"{format_count(finding.objects_per_step, signed=True)}/step"))
    if finding.retained_bytes is not None:
        facts.append(("retained", format_bytes(finding.retained_bytes)))
    if finding.detected_at_step is not None:
        facts.append(("detected at", f"step {finding.detected_at_step:,}"))
    if finding.signal:
        facts.append(("signal", finding.signal))
    for label, value in (("holder", finding.holder_path), ("source", finding.source),
                         ("pattern", finding.pattern)):
        if value:
            facts.append((label, value))
    if finding.oom is not None:
        facts.append(("OOM", oom_text(finding)))
    return facts


def oom_text(finding: Finding) -> str:
    oom = finding.oom
    if oom is None:
        return ""
    limit = f"{oom.limit_name} {format_bytes(oom.limit_bytes)}"
    if oom.steps_to_oom is None:
        return f"not heading for the {limit} limit"
    when = f" (~{format_duration(oom.seconds_to_oom)})" if oom.seconds_to_oom else ""
    return f"{limit} reached in ~{oom.steps_to_oom:,.0f} steps{when}"


def metadata_rows(view: RunView) -> list[tuple[str, str]]:
    meta = view.state.meta
    rows: list[tuple[str, str]] = [("name", view.state.name), ("status", view.state.status)]
    rows += [(k, _show(meta[k])) for k in ("script", "argv", "cwd", "exit_code", "pid",
                                            "hostname", "python", "torch", "platform")
             if meta.get(k) not in (None, "")]
    rows += [(k, format_time(meta.get(k))) for k in ("start_time", "end_time") if meta.get(k)]
    rows += [(k, format_bytes(meta[k])) for k in ("ram_total", "cgroup_limit")
             if isinstance(meta.get(k), (int, float))]
    rows += [(k, _show(meta[k])) for k in ("devices", "gpu_totals", "step_definition",
                                            "budget_pct", "torchleak_version")
             if meta.get(k) not in (None, "", [], {})]
    rows.append(("findings", view.report_source))
    rows.append(("trace", str(view.state.path)))
    return rows


def _show(value: Any) -> str:
    if isinstance(value, list):
        sep = "; " if any(isinstance(v, dict) for v in value) else " "
        return sep.join(_show(v) for v in value)
    if isinstance(value, dict):
        return ", ".join(f"{k}: {format_bytes(v) if k == 'total' and isinstance(v, int) else _show(v)}"
                         for k, v in value.items())
    return str(value)


def holder_rows(view: RunView) -> list[dict[str, str]]:
    """The holders that grew most, first sample to last: who holds the memory."""
    rows = []
    for h in view.holders:
        rows.append({
            "holder": h.holder,
            "kind": h.kind + (f" ({h.type_name})" if h.type_name else ""),
            "length": f"{_num(h.first_length)} -> {_num(h.last_length)}",
            "bytes": f"{format_bytes(h.first_bytes)} -> {format_bytes(h.last_bytes)}",
            "steps": f"{h.first_step:,}-{h.last_step:,}",
        })
    return rows


def _num(value: int | None) -> str:
    return "-" if value is None else f"{value:,}"
