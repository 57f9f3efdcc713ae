"""What the heap's accounting says the growth is made of, when the census is sparse: a
short run whose growth was seen late may get a single census before it ends."""

from __future__ import annotations

from torchleak.analysis.causes import classify, tensor_growth
from torchleak.analysis.series import RunData, Series
from torchleak.vocab import FindingKind as K

GROWTH = 96 * 1024  # bytes a step, outside Python objects


def _run(census: dict[int, int]) -> RunData:
    data = RunData(steps=400)
    blocks, in_use = Series("py_blocks", "count"), Series("malloc_in_use", "bytes")
    for step in range(0, 401, 25):
        blocks.add(step, 1_000_000 + step // 10)
        in_use.add(step, 100_000_000 + GROWTH * step)
    data.heap = {"py_blocks": blocks, "malloc_in_use": in_use}
    tensors = Series("tensor_bytes", "bytes")
    for step, counted in sorted(census.items()):
        tensors.add(step, counted)
    data.census = {"tensor_bytes": tensors} if census else {}
    return data


def test_one_census_after_the_window_began_bounds_the_tensors_growth() -> None:
    data = _run({390: 1060})
    assert tensor_growth(data, 40, 380) == (1060 / 350, True)
    cause = classify(data, GROWTH, 40, 380)
    assert cause.kind == K.NATIVE_MEMORY
    assert "tensor bytes at most 3 B/step" in cause.evidence[0], cause.evidence


def test_a_census_that_counts_many_tensor_bytes_bounds_nothing_useful() -> None:
    # 400 MB of tensors at step 390 could have grown 1.1 MB a step since step 40.
    data = _run({390: 400_000_000})
    cause = classify(data, GROWTH, 40, 380)
    assert cause.kind is None


def test_no_census_after_the_window_began_leaves_the_tensors_unknown() -> None:
    assert tensor_growth(_run({10: 1060}), 40, 380) == (None, False)
    assert tensor_growth(_run({}), 40, 380) == (None, False)
    assert classify(_run({10: 1060}), GROWTH, 40, 380).kind is None


def test_two_censuses_measure_the_slope() -> None:
    data = _run({100: 1000, 300: 1000 + 200 * 512})
    assert tensor_growth(data, 40, 380) == (512.0, False)
