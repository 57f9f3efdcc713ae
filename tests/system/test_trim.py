"""The budgeted heap trimmer: it trims when the free heap grows, and only then."""

from __future__ import annotations

import os

import pytest

pytestmark = pytest.mark.skipif(
    not (hasattr(os, "confstr") and os.confstr("CS_GNU_LIBC_VERSION")),
    reason="heap trimming is a glibc feature")

# Blocks of ~100 KB come from the heap; the small block kept after each pins it there:
# once the large ones are freed, their pages stay resident until the heap is trimmed.
PINNED_SLACK = """
def make_slack(kept, megabytes):
    large = []
    for _ in range(megabytes * 10):
        large.append(bytearray(100_000)); kept.append(bytearray(2000))
"""


def test_trims_when_free_heap_grows_and_reports_what_it_released(python) -> None:  # noqa: ANN001
    out = python(PINNED_SLACK + """
from torchleak.system.trim import SlackState, trim_if_slack
state = SlackState(grow_bytes=16 << 20, min_interval_s=0, budget_share=1.0, window=1)
kept = []
print(trim_if_slack(state))            # first look: the reference
make_slack(kept, 4)
print(trim_if_slack(state))            # 4 MB more free: under the threshold
make_slack(kept, 60)
print(trim_if_slack(state))            # 60 MB more free: trims
print(trim_if_slack(state))            # nothing new since
print(state.trims, state.released)
""")
    assert out.returncode == 0, out.stderr
    first, small, trimmed, again, totals = out.stdout.strip().splitlines()
    assert (first, small, again) == ("None", "None", "None")
    assert int(trimmed) > 40e6
    trims, released = totals.split()
    assert trims == "1" and int(released) == int(trimmed)


def test_time_budget_and_interval_hold_it_back(python) -> None:  # noqa: ANN001
    out = python(PINNED_SLACK + """
from torchleak.system.trim import SlackState, trim_if_slack
kept = []
no_budget = SlackState(grow_bytes=1 << 20, min_interval_s=0, budget_share=0.0, window=1)
no_budget.last_cost_s = 0.001  # one trim's cost, never allowed by a zero budget
interval = SlackState(grow_bytes=1 << 20, min_interval_s=3600, budget_share=1.0,
                      window=1)
for state in (no_budget, interval):
    trim_if_slack(state)
make_slack(kept, 30)
print(trim_if_slack(no_budget), trim_if_slack(interval), trim_if_slack(interval))
""")
    assert out.returncode == 0, out.stderr
    no_budget, first, second = out.stdout.split()
    assert no_budget == "None"
    assert first != "None" and second == "None"  # the next one must wait an hour


def test_trimmer_thread_trims_slack_made_while_it_runs(python) -> None:  # noqa: ANN001
    out = python(PINNED_SLACK + """
import time
from torchleak.system.procmem import rss_now
from torchleak.system.trim import SlackState, SlackTrimmer
trimmer = SlackTrimmer(SlackState(grow_bytes=8 << 20, min_interval_s=0.05), 0.02).start()
time.sleep(0.1)
kept = []
make_slack(kept, 60)
with_slack = rss_now()
deadline = time.monotonic() + 60  # until it has trimmed: a busy machine delays its thread
while trimmer.state.trims < 1 and time.monotonic() < deadline:
    time.sleep(0.02)
trimmer.stop()
print(trimmer.state.trims, (with_slack - rss_now()) >> 20, trimmer.running, trimmer.error)
""")
    assert out.returncode == 0, out.stderr
    trims, released_mib, running, error = out.stdout.split()
    assert int(trims) >= 1
    assert int(released_mib) > 40
    assert (running, error) == ("False", "None")
