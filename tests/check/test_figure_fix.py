"""TL104's ``plt.close`` is safe only when the figure provably has no later use; where
something may still draw or save it, the fix is unsafe and says why, and ``--fix`` never
reports a blanked figure as all checks passed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from torchleak.check import check_source

HEAD = """\
import matplotlib.pyplot as plt
from matplotlib.backends.backend_pdf import PdfPages


def save(path):
    plt.savefig(path)


"""

UNSAFE = {
    "helper saves after the loop": ("""\
def plot_all(curves):
    for curve in curves:
        plt.figure()
        plt.plot(curve)
    save("last.png")
""", "`save()` on line 13"),
    "PdfPages saves after the loop": ("""\
def to_pdf(curves):
    with PdfPages("report.pdf") as pdf:
        for curve in curves:
            plt.figure()
            plt.plot(curve)
        pdf.savefig()
""", "`pdf.savefig()` on line 14"),
    "figure handed to a helper": ("""\
def keep(curves, pages):
    for curve in curves:
        fig = plt.figure()
        plt.plot(curve)
        pages.add(fig)
""", "`fig` is passed to `pages.add`"),
    "figure used after the loop": ("""\
def last(curves):
    for curve in curves:
        fig = plt.figure()
        plt.plot(curve)
    fig.savefig("last.png")
""", "`fig` is used on line 13"),
    "caller saves after the call": ("""\
def draw(curves):
    for curve in curves:
        plt.figure()
        plt.plot(curve)


def main(curves):
    draw(curves)
    plt.savefig("out.png")
""", "after `draw()` returns"),
    "method's caller saves after the call": ("""\
class Plots:
    def on_validation_epoch_end(self):
        self.draw()
        plt.savefig("val.png")

    def draw(self):
        for curve in self.curves:
            plt.figure()
            plt.plot(curve)
""", "after `draw()` returns"),
    "enclosing loop saves on its next pass": ("""\
def grid(rows):
    for row in rows:
        plt.savefig("previous.png")
        for curve in row:
            plt.figure()
            plt.plot(curve)
""", "`plt.savefig()` on line 11"),
}

SAFE = """\
def per_epoch(curves):
    for epoch, curve in enumerate(curves):
        fig = plt.figure()
        plt.plot(curve)
        fig.savefig(f"{epoch}.png")
    print("done")
"""


def _fix_of(source: str):  # noqa: ANN202 - a Fix
    [d] = [d for d in check_source(source, "t.py") if d.code == "TL104"]
    assert d.fix is not None
    return d.fix


@pytest.mark.parametrize("case", sorted(UNSAFE))
def test_close_is_unsafe_with_a_reason_when_the_figure_may_be_used_later(case: str) -> None:
    body, reason = UNSAFE[case]
    fix = _fix_of(HEAD + body)
    assert not fix.safe
    assert "unsafe:" in fix.message and reason in fix.message, fix.message


def test_close_is_safe_when_nothing_can_use_the_figure_later() -> None:
    fix = _fix_of(HEAD + SAFE)
    assert fix.safe and fix.message == "Add `plt.close(fig)`"


@pytest.mark.parametrize("case", ["helper saves after the loop", "PdfPages saves after the loop"])
def test_fix_never_blanks_a_figure_and_calls_it_passed(tmp_path: Path, case: str) -> None:
    script = tmp_path / "plots.py"
    script.write_text(HEAD + UNSAFE[case][0], encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "torchleak", "check", "--fix", str(script)],
                          capture_output=True, text=True, timeout=120)
    assert "plt.close" not in script.read_text(encoding="utf-8")
    assert done.returncode == 1 and "all checks passed" not in done.stdout.lower()
