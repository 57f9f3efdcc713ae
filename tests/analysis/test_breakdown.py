"""Where the memory goes, on real CPU training loops: the census splits the measured
memory into categories that sum to it, and each finding names the category that grows."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from harness import KIB, Recorded, assert_leak, record_loop, theil_sen
from loops import BATCH, IN, make_batches, train_keeping_logits

from torchleak.analysis.breakdown import GROWS, HOST, category_for
from torchleak.record.probes.breakdown import PymallocStats, host_split
from torchleak.report import Finding
from torchleak.views.summary import finding_lines

CLASSES = 1024  # logits of BATCH x 1024 float32: 64 KiB a step
BUDGET = 0.3  # enough censuses in a short loop to fit a slope on


def _points(run: Recorded, category: str) -> list[list[float]]:
    return run.report.breakdown.get(category, [])


def _slope(run: Recorded, category: str) -> float:
    points = [p for p in _points(run, category) if p[0] >= 10]
    assert len(points) >= 2, run.explain()
    return theil_sen([p[0] for p in points], [p[1] for p in points])


def _sums_match_total(run: Recorded) -> None:
    totals = dict((int(s), v) for s, v in _points(run, "total"))
    assert totals, run.explain()
    for step, total in totals.items():
        parts = sum(v for name in HOST for s, v in _points(run, name) if int(s) == step)
        assert abs(parts - total) <= 0.05 * total, (step, parts, total)
        uss = run.rows("SELECT uss FROM steps WHERE step = ?", step)[0][0]
        assert abs(total - uss) <= 0.05 * uss, (step, total, uss)


def test_detached_logits_grow_other_tensors_at_the_kept_rate(tmp_path: Path) -> None:
    kept_per_step = BATCH * CLASSES * 4

    run = record_loop(lambda: train_keeping_logits(240, CLASSES), tmp_path, "logits",
                      "logits.py", budget=BUDGET)
    finding = assert_leak(run, "epoch_logits")
    assert finding.category == "other_tensors", run.explain()
    rate = _slope(run, "other_tensors")
    assert kept_per_step / 1.5 <= rate <= kept_per_step * 1.5, (rate, run.explain())
    for flat in ("parameters", "gradients", "optimizer_state"):
        values = {v for _, v in _points(run, flat)}
        assert len(values) == 1, (flat, _points(run, flat))
    assert any("other_tensors +" in e and "optimizer_state flat" in e for e in finding.evidence)
    # The steps the category rates span are the censuses' (after warm-up), and are said.
    censuses = [int(s) for s, _ in _points(run, "total")]
    after = [s for s in censuses if s >= 24]  # warm-up: 10% of 240 steps
    after = after if len(after) >= 2 else censuses
    line = next(e for e in finding.evidence if e.startswith(GROWS))
    assert f"steps {after[0]:,}-{after[-1]:,}: " in line, (line, censuses)
    assert f"where it grows (steps {after[0]:,}-{after[-1]:,}): other_tensors +" in \
        "\n".join(finding_lines(finding))
    _sums_match_total(run)


def test_parameters_appended_under_adam_grow_three_categories(tmp_path: Path) -> None:
    side = 128  # 64 KiB a parameter, one every 4 steps

    def train() -> None:
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(IN, 64), nn.ReLU(), nn.Linear(64, 10))
        extra = nn.ParameterList()
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)
        batches = make_batches()
        for step in range(200):
            if step % 4 == 0:
                p = nn.Parameter(torch.randn(side, side))
                extra.append(p)
                opt.add_param_group({"params": [p]})
            x, y = batches[step % len(batches)]
            loss = F.cross_entropy(model(x), y) + sum(q.square().mean() for q in extra) * 1e-6
            opt.zero_grad()
            loss.backward()
            opt.step()

    run = record_loop(train, tmp_path, "params", "params.py", budget=BUDGET)
    per_step = side * side * 4 / 4
    params, grads, state = (_slope(run, c) for c in ("parameters", "gradients",
                                                       "optimizer_state"))
    assert per_step / 1.5 <= params <= per_step * 1.5, (params, run.explain())
    assert per_step / 1.5 <= grads <= per_step * 1.5, (grads, run.explain())
    assert 1.6 <= state / params <= 2.4, (state, params)
    # Each holder's finding names the role it keeps: the optimizer's state is its own.
    categories = {f.holder_path: f.category for f in run.report.findings}
    assert categories.get("train().opt.state") == "optimizer_state", run.explain()
    assert categories.get("train().opt.param_groups") == "parameters", run.explain()
    # A growing model, advised as one; the per-step loss, whose graph grows with the model,
    # is no tensor accumulator.
    for finding in run.report.findings:
        if finding.holder_path and ".opt." in finding.holder_path:
            assert finding.pattern == "growing-model" and ".clear()" not in finding.fix.split(
                "never")[0], finding
    assert "train().loss" not in categories, run.explain()
    _sums_match_total(run)


def test_dict_of_python_floats_is_a_python_objects_leak(tmp_path: Path) -> None:
    def train() -> None:
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(IN, 64), nn.ReLU(), nn.Linear(64, 10))
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        batches = make_batches()
        history: dict[tuple[int, int], float] = {}
        for step in range(240):
            x, y = batches[step % len(batches)]
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            value = loss.item()
            for i in range(2000):
                history[(step, i)] = value * i

    run = record_loop(train, tmp_path, "floats", "floats.py", budget=BUDGET)
    finding = assert_leak(run, "history")
    assert finding.category == "python_objects", run.explain()
    assert _slope(run, "python_objects") > 100 * KIB, run.explain()
    _sums_match_total(run)


def test_outputs_kept_with_their_graph_grow_autograd_saved(tmp_path: Path) -> None:
    hidden = 256  # the graph saves the ReLU's output: BATCH x 256 float32 a step

    def train() -> None:
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(IN, hidden), nn.ReLU(), nn.Linear(hidden, 10))
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)
        batches = make_batches()
        val_preds = []
        for step in range(240):
            x, y = batches[step % len(batches)]
            loss = F.cross_entropy(model(x), y)  # backward frees this graph's saved tensors
            opt.zero_grad()
            loss.backward()
            opt.step()
            val_preds.append(model(torch.randn(BATCH, IN)))  # no torch.no_grad()

    run = record_loop(train, tmp_path, "saved", "saved.py", budget=BUDGET)
    finding = assert_leak(run, "val_preds")
    assert finding.category == "autograd_saved", run.explain()
    assert _slope(run, "autograd_saved") >= BATCH * hidden * 4, run.explain()
    _sums_match_total(run)


def test_a_freed_graph_does_not_hide_the_saved_tensors_of_a_kept_one() -> None:
    from torchleak.record.probes.graph import walk_graph

    model = nn.Sequential(nn.Linear(8, 512), nn.ReLU(), nn.Linear(512, 1))
    trained = model(torch.randn(4, 8)).sum()
    trained.backward()  # its saved tensors are freed
    kept = model(torch.randn(4, 8))
    stats = walk_graph([kept.grad_fn, trained.grad_fn], 1000)  # the freed one walked first
    assert sum(stats.saved.values()) >= 4 * 512 * 4  # the kept graph's ReLU output


def test_a_saved_weight_changed_in_place_does_not_hide_the_rest_of_the_graph() -> None:
    from torchleak.record.probes.graph import walk_graph

    model = nn.Sequential(nn.Linear(8, 512), nn.Tanh(), nn.Linear(512, 512), nn.Tanh(),
                          nn.Linear(512, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    kept = model(torch.randn(4, 8))  # kept with its graph
    model(torch.randn(4, 8)).sum().backward()
    opt.step()  # the weights kept's graph saved change in place: unpacking them refuses
    stats = walk_graph([kept.grad_fn], 1000)
    # Both Tanh outputs (the next Linear's saved input too) count, the deeper one as well.
    assert sum(stats.saved.values()) >= 2 * 4 * 512 * 4, stats.saved


# The split and the choice of category, on made-up figures -------------------------------

def test_host_split_sums_to_the_total_and_keeps_negative_slack() -> None:
    tensors = {"parameters": 100, "gradients": 100, "optimizer_state": 200, "other_tensors": 50}
    split = host_split(tensors, uss=1000, workers=300, small=200, malloc_in_use=600)
    assert split["python_objects"] == 200 + (600 - 450)
    assert split["workers"] == 300 and split["total"] == 1300
    assert sum(v for k, v in split.items() if k != "total") == 1300
    tight = host_split(tensors, uss=500, workers=0, small=200, malloc_in_use=600)
    assert tight["allocator_slack"] < 0  # kept signed: the categories still sum to the total
    assert sum(v for k, v in tight.items() if k != "total") == tight["total"]
    assert "workers" not in tight


def test_pymalloc_statistics_see_python_objects() -> None:
    stats = PymallocStats()
    before = stats.allocated()
    if before is None:
        pytest.skip("this interpreter does not use pymalloc")
    floats = [float(i) for i in range(200_000)]
    after = stats.allocated()
    assert after is not None and after - before >= 200_000 * 24
    del floats


@pytest.mark.parametrize("kind, tensors, rates, holder_rate, expected", [
    ("tensor_list", 3, {"other_tensors": 1e5, "autograd_saved": 10.0}, None, "other_tensors"),
    ("tensor_list_graph", 3, {"other_tensors": 1e4, "autograd_saved": 1e5}, None,
     "autograd_saved"),
    ("tensor_list", 3, {"parameters": 1e4, "optimizer_state": 2e4}, None, "parameters"),
    # The holder's own rate picks the role it keeps among those that grow.
    ("tensor_list", 3, {"parameters": 1e4, "gradients": 1e4, "optimizer_state": 2e4}, 1.8e4,
     "optimizer_state"),
    ("tensor_list", 3, {"parameters": 1e4, "optimizer_state": 2e4}, 1.1e4, "parameters"),
    ("tensor_list", 3, {"other_tensors": 1e5, "autograd_saved": 1e3}, 2e3, "autograd_saved"),
    ("tensor_list", 3, {"other_tensors": 1e5}, 1e3, "other_tensors"),  # nothing within 3x
    ("container", 0, {"python_objects": 1e5}, None, "python_objects"),
    ("container", 0, {}, None, "python_objects"),
    ("worker_memory", 0, {"workers": 1e6}, None, "workers"),
    ("memory", 0, {"allocator_slack": 1e5, "python_objects": 1e3}, None, "allocator_slack"),
])
def test_category_follows_what_grows(kind: str, tensors: int, rates: dict[str, float],
                                     holder_rate: float | None, expected: str) -> None:
    from torchleak.analysis.series import HolderSeries

    holder = None
    if kind not in ("worker_memory", "memory"):
        holder = HolderSeries("train().kept", "container", "list")
        holder.add(1, 1, 1, tensors, 0, 0)
    finding = Finding(kind=kind, culprit="x", severity="high", fix="",
                      holder_path="train().kept" if holder else None,
                      holder_bytes_per_step=holder_rate)
    assert category_for(finding, holder, rates) == expected


def test_census_classifies_roles_and_keeps_nothing_alive() -> None:
    import gc
    import weakref

    from torchleak.record.probes.census import take_census

    model = nn.Linear(256, 256)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    model(torch.randn(4, 256)).sum().backward()
    opt.step()
    kept = torch.zeros(1024, 256)
    result = take_census()
    weight = (256 * 256 + 256) * 4
    assert result.categories["parameters"] >= weight
    assert result.categories["gradients"] >= weight
    assert result.categories["optimizer_state"] >= 2 * weight
    assert result.categories["other_tensors"] >= kept.numel() * 4
    refs = [weakref.ref(model.weight), weakref.ref(kept),
            weakref.ref(opt.state[model.weight]["exp_avg"])]
    del model, opt, kept
    gc.collect()
    assert [r() for r in refs] == [None, None, None]
