"""The holder's size estimate samples a container: spread over it, and with its newest
elements, since what a leak adds is at the end and is often unlike what came first."""

from __future__ import annotations

from collections import deque

import torch

from torchleak.record.probes.sizes import container_footprint, sample_items

SMALL, LARGE = 1024, 64 * 1024  # bytes of the first tensors and of the ones added later


def _state(n_small: int, n_large: int) -> dict[int, dict[str, torch.Tensor]]:
    """Shaped like an optimizer's state: the model's own parameters first, then others."""
    state = {i: {"exp_avg": torch.zeros(SMALL // 4)} for i in range(n_small)}
    state.update({n_small + i: {"exp_avg": torch.zeros(LARGE // 4)} for i in range(n_large)})
    return state


def test_a_small_dict_is_sampled_across_its_length() -> None:
    state = _state(4, 56)
    true = sum(t.untyped_storage().nbytes() for d in state.values() for t in d.values())
    estimate = container_footprint(state).tensor_bytes
    assert 0.85 * true <= estimate <= 1.15 * true, (estimate, true)


def test_a_large_dict_and_deque_give_their_newest_elements() -> None:
    big = {i: i for i in range(10_000)}
    assert sample_items(big) == [0, 1, 2, 3, 9999, 9998, 9997, 9996]
    queue = deque(range(10_000))
    assert sample_items(queue) == [0, 1, 2, 3, 9999, 9998, 9997, 9996]
    assert len(sample_items(set(range(10_000)))) == 8  # no order: the first ones


def test_a_growing_state_grows_at_the_rate_of_what_is_added() -> None:
    before = container_footprint(_state(4, 20)).tensor_bytes
    after = container_footprint(_state(4, 40)).tensor_bytes
    assert 0.8 * 20 * LARGE <= after - before <= 1.2 * 20 * LARGE, after - before


def test_a_dict_counts_the_keys_made_for_its_entries_not_objects_held_elsewhere() -> None:
    history = {f"step_{i}_loss": float(i) for i in range(1000)}
    params = [torch.nn.Parameter(torch.zeros(1)) for _ in range(1000)]
    state = {p: float(i) for i, p in enumerate(params)}  # keyed by objects held elsewhere
    with_keys = container_footprint(history).bytes / 1000
    without = container_footprint(state).bytes / 1000
    assert with_keys - without >= 45, (with_keys, without)  # the string keys' own bytes
    assert without < 24 + 60, without  # a float and the dict's slot, no Parameter
