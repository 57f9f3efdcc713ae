"""How many leaky training scripts does ``torchleak check`` flag at the right line, how
many healthy ones does it leave alone, and how many findings does it raise on the
installed Lightning, transformers, accelerate and torch packages?

    python benchmarks/check_recall.py [--select ALL] [--markdown] [--no-packages]

Sets: ``benchmarks/detection`` (its manifest names each leak's source lines) and the
whole training scripts under ``tests/check/scripts`` (``manifest.json`` names the line
where each leaky script's container grows). A leaky script counts as *found* when a
finding sits on one of its named lines, as *flagged* when it has any finding. The
installed packages are found with ``importlib`` (nothing is imported or downloaded).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import time
from collections import Counter
from pathlib import Path

from torchleak.check import check_paths, check_source

ROOT = Path(__file__).resolve().parents[1]
DETECTION = ROOT / "benchmarks" / "detection"
SCRIPTS = ROOT / "tests" / "check" / "scripts"
PACKAGES = ("lightning", "transformers", "accelerate", "torch")


def _lines(path: Path, select: list[str] | None) -> list[str]:
    source = path.read_text(encoding="utf-8")
    lines = source.splitlines()
    return [lines[d.line - 1] for d in check_source(source, path.name, select=select)
            if not d.code.startswith("TL0")]


def sets() -> list[tuple[str, list[tuple[Path, list[str]]], list[Path]]]:
    """(name, [(leaky script, its named lines)], [healthy scripts]) per set."""
    manifest = json.loads((DETECTION / "manifest.json").read_text(encoding="utf-8"))
    det_leaky = [(DETECTION / "scripts" / e["script"], e["sites"])
                 for e in manifest["scripts"] if e["leaky"]]
    det_healthy = [DETECTION / "scripts" / e["script"]
                   for e in manifest["scripts"] if not e["leaky"]]
    own = json.loads((SCRIPTS / "manifest.json").read_text(encoding="utf-8"))["leaky"]
    own_leaky = [(SCRIPTS / "leaky" / name, [line]) for name, line in sorted(own.items())]
    own_healthy = sorted((SCRIPTS / "healthy").glob("*.py"))
    return [("benchmarks/detection", det_leaky, det_healthy),
            ("tests/check/scripts", own_leaky, own_healthy)]


def scripts_table(select: list[str] | None) -> list[tuple[str, int, int, int, int, int, int]]:
    rows = []
    for name, leaky, healthy in sets():
        found = flagged = 0
        for path, sites in leaky:
            lines = _lines(path, select)
            flagged += bool(lines)
            found += any(site in line for site in sites for line in lines)
        bad = [p for p in healthy if _lines(p, select)]
        findings = sum(len(_lines(p, select)) for p in healthy)
        rows.append((name, len(leaky), found, flagged, len(healthy), len(bad), findings))
    return rows


def package_table(select: list[str] | None) -> list[tuple[str, int, int, str, float]]:
    rows = []
    for package in PACKAGES:
        spec = importlib.util.find_spec(package)
        if spec is None or not spec.submodule_search_locations:
            continue
        folder = Path(list(spec.submodule_search_locations)[0])
        files = sorted(str(p) for p in folder.rglob("*.py"))
        start = time.perf_counter()
        diags = [d for d in check_paths(files, select=select) if not d.code.startswith("TL0")]
        seconds = time.perf_counter() - start
        codes = ", ".join(f"{c} {n}" for c, n in sorted(Counter(d.code for d in diags).items()))
        rows.append((package, len(files), len(diags), codes or "-", seconds))
        for d in diags:
            print(f"  {d.location.replace(str(folder.parent) + '/', '')}: {d.code} "
                  f"{d.message[:100]}")
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--select", default=None, help="codes, as for `torchleak check`")
    parser.add_argument("--markdown", action="store_true")
    parser.add_argument("--no-packages", action="store_true")
    args = parser.parse_args()
    select = args.select.split(",") if args.select else None
    rows = scripts_table(select)
    total = [sum(r[i] for r in rows) for i in range(1, 7)]
    if args.markdown:
        print("| set | leaky | found at the named line | flagged | healthy | healthy flagged "
              "| findings on healthy |")
        print("|---|---:|---:|---:|---:|---:|---:|")
        for r in rows + [("**total**", *total)]:
            print("| " + " | ".join(str(x) for x in r) + " |")
    else:
        for r in rows + [("total", *total)]:
            print(f"{r[0]:<22} leaky {r[1]:>3}  found {r[2]:>3}  flagged {r[3]:>3}  "
                  f"healthy {r[4]:>3}  healthy flagged {r[5]:>2}  findings {r[6]:>2}")
    if args.no_packages:
        return
    packages = package_table(select)
    if args.markdown:
        print("\n| package | files | findings | codes | seconds |")
        print("|---|---:|---:|---|---:|")
    for name, files, n, codes, seconds in packages:
        if args.markdown:
            print(f"| {name} | {files:,} | {n} | {codes} | {seconds:.0f} |")
        else:
            print(f"{name:<14} files {files:>5}  findings {n:>3}  {codes}  ({seconds:.0f} s)")


if __name__ == "__main__":
    main()
