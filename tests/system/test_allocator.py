"""Which malloc is in use and glibc's knobs, checked against independent sources."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from torchleak.system.allocator import detect_allocator, heap_stats, malloc_settings

GLIBC = os.confstr("CS_GNU_LIBC_VERSION") if hasattr(os, "confstr") else None
JEMALLOC = next((p for p in (Path("/usr/lib/x86_64-linux-gnu/libjemalloc.so.2"),
                             Path("/usr/lib/aarch64-linux-gnu/libjemalloc.so.2"))
                 if p.exists()), None)
needs_glibc = pytest.mark.skipif(not GLIBC, reason="not a glibc system")


@needs_glibc
def test_glibc_and_its_version_are_found() -> None:
    info = detect_allocator()
    assert info.is_glibc
    assert f"glibc {info.version}" == GLIBC


def test_malloc_settings_are_the_allocator_variables_only() -> None:
    env = {"MALLOC_ARENA_MAX": "2", "GLIBC_TUNABLES": "glibc.malloc.trim_threshold=1",
           "LD_PRELOAD": "x.so", "HOME": "/root", "MALLOCX": "no"}
    assert malloc_settings(env) == {"GLIBC_TUNABLES": "glibc.malloc.trim_threshold=1",
                                    "LD_PRELOAD": "x.so", "MALLOC_ARENA_MAX": "2"}


@needs_glibc
def test_heap_slack_is_seen_and_trim_gives_it_back(python) -> None:  # noqa: ANN001
    # 100 KiB blocks come from the heap; a small block after each pins it there. Freeing
    # the large ones leaves ~100 MiB free in the heap, resident until malloc_trim.
    out = python("""
        from torchleak.system.allocator import heap_stats, malloc_trim
        from torchleak.system.procmem import rss_now
        big, small = [], []
        for _ in range(1000):
            big.append(bytearray(100_000)); small.append(bytearray(2000))
        del big
        before, rss = heap_stats(), rss_now()
        trimmed = malloc_trim(0)
        print(before.free, before.in_use, trimmed, rss - rss_now())
    """)
    assert out.returncode == 0, out.stderr
    free, in_use, trimmed, released = out.stdout.split()
    assert int(free) > 90e6 and int(in_use) > 2e6
    assert trimmed == "True"
    assert int(released) > 80e6


@pytest.mark.skipif(JEMALLOC is None, reason="libjemalloc2 is not installed")
def test_preloaded_jemalloc_is_named_and_glibc_knobs_do_nothing(python) -> None:  # noqa: ANN001
    out = python("""
        from torchleak.system.allocator import detect_allocator, heap_stats, malloc_trim, mallopt
        info = detect_allocator()
        print(info.name, info.how, info.glibc is not None, heap_stats(), malloc_trim(0),
              mallopt(-8, 2))
    """, env={"LD_PRELOAD": str(JEMALLOC)})
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["jemalloc", "LD_PRELOAD", str(bool(GLIBC)), "None",
                                  "False", "False"]


def test_a_preload_that_did_not_load_is_not_claimed(python) -> None:  # noqa: ANN001
    out = python("from torchleak.system.allocator import detect_allocator\n"
                 "print(detect_allocator().name)",
                 env={"LD_PRELOAD": "/nonexistent/libtcmalloc.so.4"})
    assert out.returncode == 0
    assert out.stdout.strip() == ("glibc" if GLIBC else detect_allocator().name)


@needs_glibc
def test_heap_stats_is_cheap() -> None:
    import time

    heap_stats()
    # This thread's CPU time, not the wall clock: competing processes do not move it.
    start = time.thread_time()
    for _ in range(1000):
        heap_stats()
    assert (time.thread_time() - start) / 1000 < 200e-6
