"""Score the detection benchmark: did each tool report the leak, name what keeps it, and
raise a false alarm on a healthy script? Pure functions over saved results (``run.py``
writes them), so the rules can be read and tested on their own.

How each tool counts as *reporting a leak* (none but torchleak gives a verdict, so each
rule reads the tool's own output the way its documentation reads it for leaks):

- torchleak: the verdict is ``leak``.
- tracemalloc: between the snapshot after warm-up and the one near the end, the largest
  difference (``compare_to(..., "lineno")``) grew by at least ``MIN_GROWTH`` bytes.
- objgraph: between the two ``show_growth()`` calls, a type gained at least one object per
  two steps.
- memray: in leaks mode (allocations never freed), at least ``MIN_GROWTH`` bytes were
  allocated from the script's own lines (import lines excluded).
- Scalene: its leak detector lists a possible leak in the script.

A tool *names the holder* when its output shows one of the manifest's holder names
(variable, attribute, cache or hook), or one of its allocation-site lines as
``script.py:LINE``, among what it ranks first (torchleak: serious findings; tracemalloc:
top 3 differences; objgraph: the backreference chain; memray: top 3 lines at peak memory;
Scalene: reported leaks and its top 3 lines by memory growth).
"""

from __future__ import annotations

from pathlib import Path
from statistics import median
from typing import Any

MIN_GROWTH = 1024 * 1024
TOP = 3


def site_lines(entry: dict[str, Any], source: str) -> set[int]:
    """Line numbers (1-based) of the script's allocation sites named by the manifest."""
    sites = entry.get("sites") or []
    return {i for i, line in enumerate(source.splitlines(), 1)
            if any(s in line for s in sites)}


def import_lines(source: str) -> set[int]:
    return {i for i, line in enumerate(source.splitlines(), 1)
            if line.lstrip().startswith(("import ", "from "))}


def _names(text: str, entry: dict[str, Any]) -> bool:
    return any(name in text for name in entry.get("holder") or [])


def _frames_name(frames: list[str], script: str, sites: set[int]) -> bool:
    for frame in frames:
        path, _, line = frame.rpartition(":")
        if Path(path).name == script and line.isdigit() and int(line) in sites:
            return True
    return False


def score_torchleak(data: dict[str, Any], entry: dict[str, Any],
                    sites: set[int]) -> tuple[bool, bool]:
    findings = [f for f in data.get("findings") or [] if f.get("severity") in ("high", "medium")]
    named = False
    for finding in findings:
        text = " ".join(str(finding.get(k) or "") for k in ("culprit", "holder_path"))
        source = str(finding.get("source") or "").split(": ")[0]
        named = named or _names(text, entry) or _frames_name([source], entry["script"], sites)
    return data.get("verdict") == "leak", named


def score_tracemalloc(data: dict[str, Any], entry: dict[str, Any],
                      sites: set[int]) -> tuple[bool, bool]:
    top = data.get("top") or []
    flagged = bool(top) and max(t["size_diff"] for t in top) >= MIN_GROWTH
    named = any(_frames_name(t["frames"], entry["script"], sites) for t in top[:TOP])
    return flagged, named


def score_objgraph(data: dict[str, Any], entry: dict[str, Any],
                   sites: set[int]) -> tuple[bool, bool]:
    first, last = data.get("window") or [0, 0]
    growth = data.get("growth") or []
    flagged = any(delta >= 0.5 * (last - first) for _name, _count, delta in growth)
    return flagged, _names(" ".join(data.get("chain") or []), entry)


def score_memray(data: dict[str, Any], entry: dict[str, Any], sites: set[int],
                 imports: set[int]) -> tuple[bool, bool]:
    leaked = sum(size for line, size in data.get("leaks") or [] if line not in imports)
    peak = sorted(data.get("peak") or [], key=lambda p: -p[1])
    named = any(line in sites for line, _size in peak[:TOP])
    return leaked >= MIN_GROWTH, named


def score_scalene(data: dict[str, Any], entry: dict[str, Any],
                  sites: set[int]) -> tuple[bool, bool]:
    leaks = [int(line) for line in data.get("leaks") or []]
    growth = sorted(data.get("growth") or [], key=lambda g: -g[1])
    shown = leaks + [line for line, _mb in growth[:TOP]]
    return bool(leaks), any(line in sites for line in shown)


def score(tool: str, data: dict[str, Any], entry: dict[str, Any], source: str
          ) -> tuple[bool, bool]:
    sites = site_lines(entry, source)
    if tool.startswith("torchleak"):  # this tree's, or a baseline tree's
        return score_torchleak(data, entry, sites)
    if tool == "tracemalloc":
        return score_tracemalloc(data, entry, sites)
    if tool == "objgraph":
        return score_objgraph(data, entry, sites)
    if tool == "memray":
        return score_memray(data, entry, sites, import_lines(source))
    if tool == "scalene":
        return score_scalene(data, entry, sites)
    raise ValueError(f"unknown tool {tool}")


def table(manifest: list[dict[str, Any]], results: dict[tuple[str, str, int], dict[str, Any]],
          sources: dict[str, str], tools: list[str],
          plain_cpu: dict[str, float] | None = None) -> list[dict[str, Any]]:
    """One row per tool: recall, false alarms, holders named (the median run's), median
    whole-run overhead (wall time, and CPU time against ``plain_cpu`` when given), and for
    repeated runs the share of scripts whose outcome never changed."""
    return [_tool_row(tool, manifest, results, sources, plain_cpu or {})
            for tool in tools if tool != "plain"]


def _tool_row(tool: str, manifest: list[dict[str, Any]],
              results: dict[tuple[str, str, int], dict[str, Any]], sources: dict[str, str],
              plain_cpu: dict[str, float]) -> dict[str, Any]:
    outcomes: dict[str, list[tuple[bool, bool]]] = {}
    ratios: list[float] = []
    cpu_ratios: list[float] = []
    crashes = 0  # runs that exited non-zero (their output is still read when written)
    for entry in manifest:
        name = entry["script"]
        for repeat, result in sorted((k[2], r) for k, r in results.items()
                                     if k[0] == tool and k[1] == name):
            plain = reference_run(results, "plain", name, repeat)
            if plain_cpu.get(name) and result.get("cpu") and result.get("rc") == 0:
                cpu_ratios.append(result["cpu"] / plain_cpu[name])
            if result.get("cpu_only"):  # a run timed for its CPU cost only
                continue
            crashes += result.get("rc") != 0
            found = (False, False) if result.get("data") is None else score(
                tool, result["data"], entry, sources[name])  # no output: nothing reported
            outcomes.setdefault(name, []).append(found)
            if result.get("data") is not None and plain and plain.get("rc") == 0:
                ratios.append(result["wall"] / plain["wall"])
    leaky = [e for e in manifest if e["leaky"]]
    healthy = [e for e in manifest if not e["leaky"]]
    runs = max((len(o) for o in outcomes.values()), default=0)
    per_run = [_counts({n: o[r] for n, o in outcomes.items() if len(o) > r}, leaky, healthy)
               for r in range(runs)] or [(0, 0, 0)]
    middle = [sorted(c[i] for c in per_run)[(len(per_run) - 1) // 2] for i in range(3)]
    return {"tool": tool, "recall": (middle[0], len(leaky)),
            "false_alarms": (middle[1], len(healthy)), "named": (middle[2], len(leaky)),
            "overhead": median(ratios) if ratios else None,
            "cpu_overhead": median(cpu_ratios) if cpu_ratios else None,
            "cpu_scripts": len(cpu_ratios), "runs": runs,
            "agreement": (sum(len(set(o)) == 1 for o in outcomes.values()), len(outcomes)),
            "crashes": crashes, "per_run": per_run, "outcomes": outcomes}


def reference_run(results: dict[tuple[str, str, int], dict[str, Any]], reference: str,
                  script: str, repeat: int) -> dict[str, Any] | None:
    """The reference tool's run of ``script`` a recorded run is timed against: the one of
    the same repeat (run just before it), else the first."""
    return results.get((reference, script, repeat)) or results.get((reference, script, 0))


def _counts(outcome: dict[str, tuple[bool, bool]], leaky: list[dict[str, Any]],
            healthy: list[dict[str, Any]]) -> tuple[int, int, int]:
    miss = (False, False)
    return (sum(outcome.get(e["script"], miss)[0] for e in leaky),
            sum(outcome.get(e["script"], miss)[0] for e in healthy),
            sum(outcome.get(e["script"], miss)[1] for e in leaky))


def live_table(manifest: list[dict[str, Any]],
               results: dict[tuple[str, str, int], dict[str, Any]]) -> dict[str, Any]:
    """torchleak's live side, from the ``live`` section of its JSON: healthy runs with a
    called live leak (the warning on stderr) and guard stops, leaky runs called before
    the end and the delay from the leak's onset to the call, calls the end withdrew, and
    repeat stability (verdict, live tier and top holder the same in every run)."""
    warned, healthy_runs, called, leaky_runs, withdrawn, delays = 0, 0, 0, 0, 0, []
    stable, scripts = 0, 0
    for entry in manifest:
        runs = [r["data"] for k, r in sorted(results.items())
                if k[0] == "torchleak" and k[1] == entry["script"] and r.get("data")]
        if not runs:
            continue
        scripts += 1
        shapes = {(d.get("verdict"), (d.get("live") or {}).get("tier"), _top(d)) for d in runs}
        stable += len(shapes) == 1
        for data in runs:
            calls = (data.get("live") or {}).get("calls") or []
            withdrawn += sum(not c.get("kept") for c in calls)
            if entry["leaky"]:
                leaky_runs += 1
                if calls:
                    called += 1
                    delays.append(min(c["step"] for c in calls) - entry.get("onset", 1))
            else:
                healthy_runs += 1
                warned += bool(calls) or bool((data.get("guard") or {}).get("mode"))
    return {"healthy_warned": (warned, healthy_runs), "leaky_called": (called, leaky_runs),
            "withdrawn": withdrawn, "median_delay": median(delays) if delays else None,
            "max_delay": max(delays) if delays else None, "stable": (stable, scripts)}


def _top(data: dict[str, Any]) -> str:
    findings = [f for f in data.get("findings") or [] if f.get("severity") in ("high", "medium")]
    return str(findings[0].get("holder_path") or findings[0].get("culprit")) if findings else ""
