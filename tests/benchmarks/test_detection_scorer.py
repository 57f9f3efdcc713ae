"""The detection benchmark's scorer on made-up tool outputs (the benchmark itself runs
training scripts for tens of minutes and is not part of the test suite)."""

from __future__ import annotations

import json

import pytest
from benchkit import BENCHMARKS, load_benchmark

ROOT = BENCHMARKS / "detection"
SOURCE = """import torch

def main():
    history = {}
    for step in range(10):
        history[step] = step * 1.5
"""
ENTRY = {"script": "train.py", "leaky": True, "steps": 10, "holder": ["history"],
         "sites": ["history[step] ="]}


score = load_benchmark("detection/score.py", "detection_score")


def test_sites_are_resolved_to_line_numbers() -> None:
    assert score.site_lines(ENTRY, SOURCE) == {6}
    assert score.import_lines(SOURCE) == {1}


@pytest.mark.parametrize("tool, data, expected", [
    ("torchleak", {"verdict": "leak", "findings": [
        {"severity": "high", "culprit": "local history in main() (dict of float)",
         "holder_path": "main().history"}]}, (True, True)),
    ("torchleak", {"verdict": "leak", "findings": [
        {"severity": "low", "culprit": "local history in main()"}]}, (True, False)),
    ("torchleak", {"verdict": "no_leak", "findings": []}, (False, False)),
    ("torchleak", {"verdict": "leak", "findings": [
        {"severity": "high", "culprit": "main process memory", "source": "/x/train.py:6: "
         "history[step] = step * 1.5"}]}, (True, True)),
    ("tracemalloc", {"top": [{"size_diff": 2 << 20, "frames": ["/x/train.py:6"]}]},
     (True, True)),
    ("tracemalloc", {"top": [{"size_diff": 1000, "frames": ["/lib/torch/nn.py:6"]}]},
     (False, False)),
    ("objgraph", {"window": [2, 9], "growth": [["dict", 10, 4]], "chain": [
        "module(train)['history']", "dict"]}, (True, True)),
    ("objgraph", {"window": [2, 9], "growth": [["dict", 10, 3]], "chain": []},
     (False, False)),
    ("memray", {"leaks": [[1, 50 << 20], [6, 10]], "peak": [[6, 5 << 20], [1, 70 << 20]]},
     (False, True)),
    ("memray", {"leaks": [[6, 2 << 20]], "peak": [[1, 1]]}, (True, False)),
    ("scalene", {"leaks": ["6"], "growth": [[1, 50.0]]}, (True, True)),
    ("scalene", {"leaks": [], "growth": [[3, 9.0], [6, 5.0]]}, (False, True)),
])
def test_each_tool_is_read_by_its_own_rule(tool: str, data: dict[str, object],
                                           expected: tuple[bool, bool]) -> None:
    assert score.score(tool, data, ENTRY, SOURCE) == expected


def test_table_counts_recall_false_alarms_names_overhead_and_agreement() -> None:
    healthy = {"script": "ok.py", "leaky": False, "steps": 10}
    manifest = [ENTRY, healthy]
    leak = {"verdict": "leak", "findings": [{"severity": "high", "culprit": "history",
                                             "holder_path": "main().history"}]}
    results = {
        ("plain", "train.py", 0): {"rc": 0, "wall": 2.0, "data": {}},
        ("plain", "ok.py", 0): {"rc": 0, "wall": 4.0, "data": {}},
        ("torchleak", "train.py", 0): {"rc": 0, "wall": 2.2, "data": leak},
        ("torchleak", "train.py", 1): {"rc": 0, "wall": 2.4, "data": leak},
        ("torchleak", "ok.py", 0): {"rc": 0, "wall": 4.4, "data": {"verdict": "no_leak"}},
        ("torchleak", "ok.py", 1): {"rc": 0, "wall": 4.8, "data": leak},
        ("scalene", "train.py", 0): {"rc": 1, "wall": 9.0, "data": None},
    }
    rows = score.table(manifest, results, {"train.py": SOURCE, "ok.py": ""},
                       ["plain", "torchleak", "scalene"])
    by_tool = {r["tool"]: r for r in rows}
    assert set(by_tool) == {"torchleak", "scalene"}
    ours = by_tool["torchleak"]
    assert ours["recall"] == (1, 1) and ours["false_alarms"] == (0, 1)
    assert ours["named"] == (1, 1) and ours["runs"] == 2
    assert ours["agreement"] == (1, 2)  # the healthy script flipped once
    assert ours["overhead"] == pytest.approx(1.15)
    assert by_tool["scalene"]["recall"] == (0, 1)  # a failed run reports nothing


def test_manifest_names_real_scripts_and_sites() -> None:
    manifest = json.loads((ROOT / "manifest.json").read_text())["scripts"]
    assert 12 <= len(manifest) <= 40
    assert {e["leaky"] for e in manifest} == {True, False}
    for entry in manifest:
        source = (ROOT / "scripts" / entry["script"]).read_text()
        if entry["leaky"]:
            assert entry["holder"] and score.site_lines(entry, source), entry["script"]


def test_cpu_overhead_uses_cpu_timed_runs_without_counting_them_as_repeats() -> None:
    manifest = [ENTRY]
    leak = {"verdict": "leak", "findings": []}
    results = {
        ("plain", "train.py", 0): {"rc": 0, "wall": 2.0, "cpu": 2.0, "data": {}},
        ("torchleak", "train.py", 0): {"rc": 0, "wall": 3.0, "data": leak},
        ("torchleak", "train.py", 100): {"rc": 0, "wall": 9.0, "cpu": 2.2, "data": leak,
                                         "cpu_only": True},
    }
    row = score.table(manifest, results, {"train.py": SOURCE}, ["torchleak"],
                      {"train.py": 2.0})[0]
    assert row["runs"] == 1 and row["overhead"] == pytest.approx(1.5)
    assert row["cpu_overhead"] == pytest.approx(1.1) and row["cpu_scripts"] == 1
