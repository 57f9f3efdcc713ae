"""Rules the test suite keeps so that it passes on a busy machine: no assertion decides
on the wall clock (a duration, a sleep's length, what happened within a time). A test
waits for the event itself, with a generous deadline that only stops a hang
(``assert time.monotonic() < deadline``); see CONTRIBUTING.md."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
CLOCKS = {"time", "monotonic", "perf_counter", "monotonic_ns", "perf_counter_ns", "time_ns",
          "sleep"}


def _clock_calls(node: ast.AST) -> list[ast.Call]:
    return [n for n in ast.walk(node) if isinstance(n, ast.Call)
            and isinstance(n.func, (ast.Attribute, ast.Name))
            and (n.func.attr if isinstance(n.func, ast.Attribute) else n.func.id) in CLOCKS]


def _a_deadline_guard(test: ast.expr) -> bool:
    """``time.monotonic() < deadline`` (alone or in an ``and``): a bound on a wait for an
    event, which fails only on a hang."""
    parts = test.values if isinstance(test, ast.BoolOp) else [test]
    for part in parts:
        if not _clock_calls(part):
            continue
        if not (isinstance(part, ast.Compare) and len(part.ops) == 1
                and isinstance(part.ops[0], ast.Lt) and not _clock_calls(part.comparators[0])
                and isinstance(part.comparators[0], ast.Name)
                and "deadline" in part.comparators[0].id):
            return False
    return True


def _test_files() -> list[Path]:
    files = []
    for path in sorted(TESTS.rglob("*.py")):
        parts = set(path.relative_to(TESTS).parts)
        if parts & {"corpus", "field_reports", "fixtures", "fixes"}:  # inputs, not tests
            continue
        files.append(path)
    return files


def test_no_assertion_decides_on_the_wall_clock() -> None:
    offenders = []
    files = _test_files()
    assert len(files) > 50
    for path in files:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        timed = _names_from_clocks(tree)
        for node in ast.walk(tree):
            if not isinstance(node, ast.Assert):
                continue
            names = {n.id for n in ast.walk(node.test) if isinstance(n, ast.Name)}
            if (_clock_calls(node.test) and not _a_deadline_guard(node.test)) or names & timed:
                offenders.append(f"{path.relative_to(TESTS)}:{node.lineno}")
    assert not offenders, offenders


def _names_from_clocks(tree: ast.AST) -> set[str]:
    """Names bound to a reading of the clock other than a deadline (``elapsed = ...``)."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and _clock_calls(node.value):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)
                      and "deadline" not in t.id}
    return names


def test_the_rule_sees_a_duration_and_lets_a_deadline_pass() -> None:
    bad = ast.parse("assert time.monotonic() - started < 5").body[0]
    guard = ast.parse("assert time.monotonic() < deadline and proc.poll() is None").body[0]
    assert isinstance(bad, ast.Assert) and isinstance(guard, ast.Assert)
    assert _clock_calls(bad.test) and not _a_deadline_guard(bad.test)
    assert _a_deadline_guard(guard.test)
    elapsed = ast.parse("elapsed = time.perf_counter() - start\nassert elapsed < 1")
    assert _names_from_clocks(elapsed) == {"elapsed"}
