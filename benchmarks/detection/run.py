"""Run the detection benchmark: every script under plain Python, torchleak and the peers,
then print the table for BENCHMARKS.md.

    python benchmarks/detection/run.py                 # everything (tens of minutes)
    python benchmarks/detection/run.py --tools torchleak --repeats 5 --only plain_loss_sum.py
    python benchmarks/detection/run.py --table-only    # score what is saved

Each run's result is saved under ``results/`` (one JSON per tool, script and repeat) and
skipped when it exists, so an interrupted run resumes. Peers need the ``benchmark``
extra: ``pip install -c constraints.txt -e ".[benchmark]"``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import score

HERE = Path(__file__).resolve().parent
SCRIPTS = HERE / "scripts"
TOOLS = ("plain", "torchleak", "tracemalloc", "objgraph", "memray", "scalene")
# torchleak from another tree (``--baseline SRC``), run beside this tree's: before/after.
BASELINE = "torchleak-baseline"
# python with torchleak run's freeze of start-up and torch objects (``frozen.py``): the
# reference for torchleak's own cost (``--tools plain,plain-frozen,torchleak``).
FROZEN = "plain-frozen"
REPEATED = ("plain", FROZEN, "torchleak", BASELINE)  # run --repeats times; the peers once
TIMEOUT = 300  # seconds; a run stopped here reports nothing (plain runs take 5-60 s)


def command(tool: str, script: Path, steps: int, work: Path) -> list[str]:
    py = sys.executable
    if tool == "plain":
        return [py, str(script)]
    if tool == FROZEN:
        return [py, str(HERE / "frozen.py"), str(script)]
    if tool in ("torchleak", BASELINE):
        return [py, "-m", "torchleak", "run", "--quiet", "--out", str(work / "run"), "--json",
                str(work / "out.json"), str(script)]
    if tool in ("tracemalloc", "objgraph"):
        return [py, str(HERE / "inprocess.py"), tool, "--steps", str(steps), "--out",
                str(work / "out.json"), str(script)]
    if tool == "memray":  # its documentation's setting for finding leaks
        return [py, "-m", "memray", "run", "--trace-python-allocators", "--aggregate", "-q",
                "-f", "-o", str(work / "out.bin"), str(script)]
    if tool == "scalene":
        return [py, "-m", "scalene", "run", "-o", str(work / "out.json"), str(script)]
    raise ValueError(tool)


def collect(tool: str, script: Path, work: Path) -> dict[str, Any] | None:
    """The tool's own output, reduced to what the scorer reads."""
    if tool in ("plain", FROZEN):
        return {}
    if tool == "memray":
        return _memray(work / "out.bin", script.name)
    out = work / "out.json"
    if not out.exists():
        return None
    data = json.loads(out.read_text())
    if tool == "scalene":
        return _scalene(data, script.name)
    if tool in ("torchleak", BASELINE):
        return {"verdict": data.get("verdict"), "findings": data.get("findings"),
                "overhead": data.get("overhead"), "live": data.get("live"),
                "guard": data.get("guard")}
    return data


def _memray(path: Path, name: str) -> dict[str, Any] | None:
    """Bytes per script line (the innermost frame in the script) at peak and leaked."""
    if not path.exists():
        return None
    from memray import FileReader

    reader = FileReader(str(path))
    found = {}
    for mode, records in (("peak", reader.get_high_watermark_allocation_records(True)),
                          ("leaks", reader.get_leaked_allocation_records(True))):
        by_line: Counter[int] = Counter()
        for record in records:
            line = next((ln for _f, file, ln in record.stack_trace() if
                         Path(file).name == name), None)
            if line is not None:
                by_line[line] += record.size
        found[mode] = [[line, size] for line, size in by_line.most_common(20)]
    return found


def _scalene(data: dict[str, Any], name: str) -> dict[str, Any]:
    for file, info in (data.get("files") or {}).items():
        if Path(file).name == name:
            growth = [[line["lineno"], line.get("n_growth_mb") or 0.0]
                      for line in info.get("lines") or []]
            return {"leaks": list((info.get("leaks") or {}).keys()),
                    "growth": sorted(growth, key=lambda g: -g[1])[:20]}
    return {"leaks": [], "growth": []}


def run_one(tool: str, entry: dict[str, Any], repeat: int, results: Path,
            baseline: Path | None = None) -> dict[str, Any]:
    target = results / tool / f"{entry['script']}.{repeat}.json"
    if target.exists():
        return json.loads(target.read_text())
    script = SCRIPTS / entry["script"]
    work = Path(tempfile.mkdtemp(prefix=f"detect-{tool}-"))
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1",
               TORCHLEAK_RUNS_DIR=str(work / "runs"))
    if tool == BASELINE and baseline is not None:
        env["PYTHONPATH"] = str(baseline)
    started = time.perf_counter()
    cpu_before = _children_cpu()
    # A session of its own: a timeout ends the tool's child processes too (Scalene runs
    # the script in a child).
    proc = subprocess.Popen(command(tool, script, entry["steps"], work), cwd=work, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    try:
        output, _ = proc.communicate(timeout=TIMEOUT)
        rc = proc.returncode
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        rc, output = 124, "timed out"
    wall = time.perf_counter() - started
    cpu = _children_cpu() - cpu_before  # CPU seconds: far less sensitive to other load
    try:
        # A tool that crashes on the way out may still have written its profile.
        data = collect(tool, script, work) if rc in (0, 245, -11, 139) else None
    except Exception as err:  # noqa: BLE001 - a tool whose output cannot be read scores 0
        data, output = None, f"{output}\ncollect failed: {type(err).__name__}: {err}"
    if data is not None or rc != 0:
        shutil.rmtree(work, ignore_errors=True)  # kept when its output could not be read
    result = {"tool": tool, "script": entry["script"], "repeat": repeat, "rc": rc,
              "wall": round(wall, 3), "cpu": round(cpu, 3), "load": os.getloadavg()[0],
              "data": data,
              "output_tail": output[-3000:]}
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(result, indent=1))
    return result


def _children_cpu() -> float:
    """User + system seconds of every finished child process (and what they waited for:
    DataLoader workers, Scalene's child)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def whole_run_ratios(results: dict[tuple[str, str, int], dict[str, Any]], tool: str,
                     reference: str) -> list[tuple[float, str]]:
    """(tool's wall / the reference's wall, script) for each finished run of ``tool``."""
    ratios = []
    for (name, script, repeat), result in results.items():
        base = score.reference_run(results, reference, script, repeat)
        if name == tool and result.get("rc") == 0 and base and base.get("rc") == 0 \
                and not result.get("cpu_only"):
            ratios.append((result["wall"] / base["wall"], script))
    return ratios


def load_results(results: Path) -> dict[tuple[str, str, int], dict[str, Any]]:
    found = {}
    for path in results.glob("*/*.json"):
        data = json.loads(path.read_text())
        found[(data["tool"], data["script"], int(data["repeat"]))] = data
    return found


def markdown(rows: list[dict[str, Any]]) -> str:
    lines = ["| tool | leaks reported (recall) | false alarms | holder or site named | "
             "whole-run wall time vs plain (median) | CPU time vs plain (median) | "
             "same outcome over repeats |", "|---|---|---|---|---|---|---|"]
    for row in rows:
        if row["tool"] == "plain":
            continue
        overhead = f"{row['overhead']:.2f}x" if row["overhead"] else "-"
        agree = "- (1 run)"
        if row["runs"] > 1:
            spread = ", ".join(f"{lo}-{hi}" if lo != hi else f"{lo}" for lo, hi in (
                (min(c[i] for c in row["per_run"]), max(c[i] for c in row["per_run"]))
                for i in range(3)))
            agree = (f"{row['agreement'][0]}/{row['agreement'][1]} scripts over {row['runs']} "
                     f"runs (recall, false alarms, named per run: {spread})")
        cpu = (f"{row['cpu_overhead']:.2f}x ({row['cpu_scripts']} runs)"
               if row["cpu_overhead"] else "-")
        lines.append(f"| {row['tool']} | {row['recall'][0]}/{row['recall'][1]} | "
                     f"{row['false_alarms'][0]}/{row['false_alarms'][1]} | "
                     f"{row['named'][0]}/{row['named'][1]} | {overhead} | {cpu} | {agree} |")
    return "\n".join(lines)


def per_script(rows: list[dict[str, Any]], manifest: list[dict[str, Any]]) -> str:
    tools = [r for r in rows if r["tool"] != "plain"]
    head = "| script | style | leaky | " + " | ".join(r["tool"] for r in tools) + " |"
    lines = [head, "|" + "---|" * (3 + len(tools))]
    for entry in manifest:
        cells = []
        for row in tools:
            outcome = row["outcomes"].get(entry["script"])
            if not outcome:
                cells.append("-")
                continue
            if len(outcome) > 1:  # repeated runs: how many reported and named it
                flagged, named = (sum(o[i] for o in outcome) for i in (0, 1))
                cells.append(f"leak {flagged}/{len(outcome)}" + (
                    f", named {named}/{len(outcome)}" if named else ""))
                continue
            flagged, named = outcome[0]
            cells.append(("leak" if flagged else "no") + (" + named" if named else ""))
        lines.append(f"| {entry['script']} | {entry['style']} | "
                     f"{'yes' if entry['leaky'] else 'no'} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tools", default=",".join(TOOLS))
    parser.add_argument("--repeats", type=int, default=5, help="runs per script of plain, torchleak and the baseline (interleaved)")
    parser.add_argument("--only", action="append", help="a script name (repeatable)")
    parser.add_argument("--results", type=Path, default=HERE / "results")
    parser.add_argument("--table-only", action="store_true")
    parser.add_argument("--baseline", type=Path, metavar="SRC",
                        help=f"another tree's src folder, run as {BASELINE!r} beside "
                             "torchleak (add it to --tools)")
    parser.add_argument("--cpu-results", type=Path, default=HERE / "results-cpu",
                        help="a second pass of plain and torchleak timed in CPU seconds")
    args = parser.parse_args()
    manifest = json.loads((HERE / "manifest.json").read_text())["scripts"]
    chosen = [e for e in manifest if not args.only or e["script"] in args.only]
    tools = args.tools.split(",")
    if not args.table_only:
        for entry in chosen:
            # Interleaved: each repeat runs plain Python beside torchleak, so each
            # recorded run's wall time is compared with a plain run made beside it (one
            # plain run for all repeats made its noise every ratio's). The order rotates
            # with the repeat, so no tool always runs first or last.
            for repeat in range(args.repeats):
                shift = repeat % len(tools)
                for tool in tools[shift:] + tools[:shift]:
                    if repeat and tool not in REPEATED:
                        continue  # the peers: once each
                    result = run_one(tool, entry, repeat, args.results, args.baseline)
                    print(f"{tool:12} {entry['script']:28} #{repeat} rc={result['rc']} "
                          f"{result['wall']:.1f} s", flush=True)
    results = load_results(args.results)
    cpu_pass = load_results(args.cpu_results) if args.cpu_results.exists() else {}
    plain_cpu = {k[1]: r["cpu"] for k, r in {**results, **cpu_pass}.items()
                 if k[0] == "plain" and r.get("rc") == 0 and r.get("cpu")}
    for key, result in cpu_pass.items():  # CPU-timed runs of torchleak join its CPU column
        if key[0] != "plain":
            results.setdefault((key[0], key[1], 100 + key[2]), {**result, "cpu_only": True})
    sources = {e["script"]: (SCRIPTS / e["script"]).read_text() for e in manifest}
    rows = score.table(manifest, results, sources, [t for t in TOOLS + (BASELINE,)
                                                    if t in tools or args.table_only], plain_cpu)
    print(markdown(rows))
    print()
    for row in rows:
        for reference in ("plain", FROZEN):
            ratios = whole_run_ratios(results, row["tool"], reference)
            if ratios:
                worst = max(ratios, key=lambda r: r[0])
                print(f"{row['tool']} wall / {reference} wall over {len(ratios)} runs: median "
                      f"{statistics.median(r for r, _ in ratios):.3f}, worst {worst[0]:.3f} "
                      f"({worst[1]}), over 1.15: {sum(r > 1.15 for r, _ in ratios)}")
    print()
    print(per_script(rows, manifest))
    live = score.live_table(manifest, results)
    if live["stable"][1]:
        print()
        print(f"torchleak live: healthy runs warned or guarded {live['healthy_warned'][0]}/"
              f"{live['healthy_warned'][1]}; leaky runs called live {live['leaky_called'][0]}/"
              f"{live['leaky_called'][1]} (delay from onset: median {live['median_delay']}, "
              f"max {live['max_delay']} steps); live calls withdrawn at the end "
              f"{live['withdrawn']}; same verdict, tier and top holder in every repeat "
              f"{live['stable'][0]}/{live['stable'][1]} scripts")


if __name__ == "__main__":
    main()
