"""How precise is ``torchleak check`` on real training code? Downloads pinned releases of
maintained PyTorch training libraries with pip (their examples, recipes, trainers,
callbacks and model code), extracts every ``.py`` file, checks them, and prints findings
per rule, each judged true or false against the reviewed list below. Then checks the
hand-written leak/clean snippets under ``tests/check/corpus`` and the field-report blocks.

    python benchmarks/check_corpus.py [--cache DIR] [--markdown]

Not a test: it needs the package index. Nothing downloaded is kept in the repository.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile
from collections import Counter
from pathlib import Path

from torchleak.check import ALL_RULES, check_paths, check_source

ROOT = Path(__file__).resolve().parents[1]
# (distribution, version, "sdist" or "wheel")
PACKAGES = [
    ("lightning", "2.6.6", "sdist"),
    ("transformers", "5.23.0", "sdist"),
    ("accelerate", "1.15.0", "sdist"),
    ("trl", "1.16.0", "wheel"),
    ("torchtune", "0.6.1", "wheel"),
    ("timm", "1.0.31", "sdist"),
    ("pytorch-ignite", "0.5.5", "wheel"),
    ("stable-baselines3", "2.9.2", "wheel"),
    ("sentence-transformers", "6.2.0", "wheel"),
    ("lightning-bolts", "0.7.0", "wheel"),
    ("torchvision", "0.29.1", "wheel"),
]
# Reviewed findings: (package, path inside the archive, code) -> (true leak?, why).
VERDICTS = {
    ("transformers", "src/transformers/models/omdet_turbo/modeling_omdet_turbo.py", "TL203"):
        (True, "lru_cache(maxsize=32) on a decoder method: the class-level cache keeps up to "
               "32 decoders (with their weights) alive after the model is deleted"),
}


def download(cache: Path) -> list[tuple[str, Path]]:
    cache.mkdir(parents=True, exist_ok=True)
    found = []
    for name, version, kind in PACKAGES:
        have = _cached(cache, name, version)
        if not have:
            flag = "--no-binary=:all:" if kind == "sdist" else "--only-binary=:all:"
            subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "-q", flag,
                            "-d", str(cache), f"{name}=={version}"], check=True)
            have = _cached(cache, name, version)
        found.append((name, have[0]))
    return found


def _cached(cache: Path, name: str, version: str) -> list[Path]:
    prefix = f"{name}_{version}".replace("-", "_").lower()
    return [p for p in cache.iterdir() if p.name.replace("-", "_").lower().startswith(prefix)]


def extract(name: str, archive: Path, into: Path) -> Path:
    """Every ``.py`` file of the archive under ``into/name``, paths kept."""
    target = into / name
    target.mkdir(parents=True)
    if archive.suffix in (".whl", ".zip"):
        with zipfile.ZipFile(archive) as zf:
            for member in zf.namelist():
                if member.endswith(".py") and not member.startswith(("/", "..")):
                    (target / member).parent.mkdir(parents=True, exist_ok=True)
                    (target / member).write_bytes(zf.read(member))
    else:
        with tarfile.open(archive) as tf:
            for member in tf.getmembers():
                parts = member.name.split("/", 1)
                if member.isfile() and member.name.endswith(".py") and len(parts) == 2 \
                        and ".." not in parts[1]:
                    data = tf.extractfile(member)
                    if data is not None:
                        (target / parts[1]).parent.mkdir(parents=True, exist_ok=True)
                        (target / parts[1]).write_bytes(data.read())
    return target


def real_code(cache: Path, markdown: bool) -> None:
    archives = download(cache)
    rows, per_rule = [], Counter()
    total_files = total_lines = 0
    seconds = 0.0
    with tempfile.TemporaryDirectory() as tmp:
        for name, archive in archives:
            tree = extract(name, archive, Path(tmp))
            files = list(tree.rglob("*.py"))
            lines = sum(p.read_bytes().count(b"\n") for p in files)
            start = time.perf_counter()
            found = [d for d in check_paths([str(tree)]) if not d.code.startswith("TL0")]
            seconds += time.perf_counter() - start
            true = false = 0
            for d in found:
                rel = Path(d.path).relative_to(tree).as_posix()
                verdict, why = VERDICTS.get((name, rel, d.code), (False, "not reviewed"))
                per_rule[(d.code, verdict)] += 1
                true, false = true + verdict, false + (not verdict)
                print(f"  {'TRUE ' if verdict else 'FALSE'} {name}/{rel}:{d.line}: {d.code} "
                      f"{why}", file=sys.stderr)
            rows.append((name, archive.name, len(files), lines, true, false))
            total_files, total_lines = total_files + len(files), total_lines + lines
    print_table(rows, markdown)
    codes = sorted({c for c, _ in per_rule})
    print(f"\n{total_files} files, {total_lines} lines, checked at "
          f"{total_lines / seconds:,.0f} lines/s")
    for code in codes:
        print(f"{code}: {per_rule[(code, True)]} true, {per_rule[(code, False)]} false")


def print_table(rows: list[tuple[str, str, int, int, int, int]], markdown: bool) -> None:
    if markdown:
        print("| package | files | lines | true findings | false alarms |")
        print("|---|---:|---:|---:|---:|")
        for name, archive, files, lines, true, false in rows:
            print(f"| {archive} | {files} | {lines} | {true} | {false} |")
        return
    for name, archive, files, lines, true, false in rows:
        print(f"{archive:55} {files:5} files {lines:8} lines  {true} true  {false} false")


def snippets() -> None:
    """Recall and false alarms on the hand-written snippets and field-report blocks."""
    corpus = ROOT / "tests" / "check" / "corpus"
    found, missed, noisy = Counter(), Counter(), 0
    for path in sorted((corpus / "leaks").glob("*.py")):
        text = path.read_text(encoding="utf-8")
        expected = text.splitlines()[0].removeprefix("# expect: ").split()
        got = {d.code for d in check_source(text, path.name)}
        for code in expected:
            (found if code in got else missed)[code] += 1
    clean = sorted((corpus / "clean").glob("*.py")) + \
        sorted((ROOT / "tests" / "check" / "field_reports").glob("fixed_*.py"))
    for path in clean:
        noisy += any(not d.code.startswith("TL0")
                     for d in check_source(path.read_text(encoding="utf-8"), path.name))
    leaky = sorted((ROOT / "tests" / "check" / "field_reports").glob("leaky_*.py"))
    flagged = sum(bool(check_source(p.read_text(encoding="utf-8"), p.name)) for p in leaky)
    print(f"\nleak snippets: {sum(found.values())} of {sum(found.values()) + sum(missed.values())}"
          f" expected findings; clean snippets with a finding: {noisy} of {len(clean)}; "
          f"field-report leaky blocks flagged: {flagged} of {len(leaky)}")
    for rule in ALL_RULES:
        if found[rule.code] or missed[rule.code]:
            print(f"{rule.code}: {found[rule.code]} found, {missed[rule.code]} missed")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache", type=Path,
                        default=Path(tempfile.gettempdir()) / "torchleak-check-corpus")
    parser.add_argument("--markdown", action="store_true")
    parser.add_argument("--snippets-only", action="store_true")
    args = parser.parse_args()
    if not args.snippets_only:
        real_code(args.cache, args.markdown)
    snippets()


if __name__ == "__main__":
    main()
