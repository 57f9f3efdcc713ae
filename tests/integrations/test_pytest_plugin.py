"""The pytest plugin: @pytest.mark.no_leak fails exactly the test whose loop leaks, with
a message that names the holder, the rate and the fix."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.integrations

LOOPS = '''
import pytest
import torch
from torch import nn


def train(steps, keep=None):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 4))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    for _ in range(steps):
        loss = model(torch.randn(16, 32)).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if keep is not None:
            keep.append(loss)
'''


def test_exactly_the_leaky_loop_fails_naming_its_holder(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_loops=LOOPS + '''

@pytest.mark.no_leak
def test_healthy():
    train(60)


@pytest.mark.no_leak
def test_leaky():
    loss_history = []
    train(60, loss_history)
''')
    # A fresh process: the plugin comes from the installed package's pytest11 entry point.
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines([
        "*FAILED test_loops.py::test_leaky - Failed: the training loop leaks*"])
    out = result.stdout.str()
    assert "PASSED" not in out or "test_healthy" in out
    assert "local keep in train() (list of Tensor, +1 items/step)" in out  # the holder
    assert "rate +" in out and "/step" in out  # the rate
    assert "fix: store `x.detach()`" in out  # the fix
    assert "keep.append(loss)" in out  # the line that adds to it
    assert "torchleak report" in out


def test_marker_arguments(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_args=LOOPS + '''

@pytest.mark.no_leak(steps=100)
def test_too_short():
    train(20)


@pytest.mark.no_leak(tolerance="1MiB")
def test_leak_within_tolerance():
    train(60, [])


@pytest.mark.no_leak(step=3)
def test_misspelt():
    train(5)


def test_unmarked_leak_is_not_checked():
    train(40, [])
''')
    # -rN: the short summary repeats each message, cut or whole depending on the
    # terminal's width; the count below is about the failure report itself.
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "-rN")
    result.assert_outcomes(passed=2, failed=2)
    out = result.stdout.str()
    assert "the loop made 20 steps; @pytest.mark.no_leak(steps=100) needs at least 100" in out
    assert "@pytest.mark.no_leak takes steps= and tolerance=, not step" in out
    assert out.count("takes steps= and tolerance=, not step") == 1  # printed once
    assert "During handling" not in out


def test_the_marker_is_registered(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest_inprocess("--markers")
    result.stdout.fnmatch_lines(["@pytest.mark.no_leak(steps=None, tolerance=0): fail the test*"])
