"""``torchleak report RUN``: the run as a terminal summary, an HTML page or JSON."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from torchleak.errors import OutputNotWritable

HELP = "render a recorded run as text, HTML or JSON, or export it to TensorBoard"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run", nargs="?", default=None,
                        help="run folder or trace.sqlite (default: the newest run)")
    parser.add_argument("--format", "-f", choices=("text", "html", "json", "tensorboard"),
                        default=None, help="output format (default: html when -o ends in "
                        ".html, else text); tensorboard writes event files into the folder "
                        "given with -o")
    parser.add_argument("-o", "--output", type=Path, default=None,
                        help="write to this file instead of standard output (a folder for "
                             "--format tensorboard)")
    parser.add_argument("--rank", type=int, default=None, metavar="N",
                        help="one rank's full report, for a multi-rank (torchrun) run")
    parser.add_argument("--runs-dir", type=Path, default=None,
                        help="where to find the newest run (default: $TORCHLEAK_RUNS_DIR or "
                             "./torchleak-runs)")


def execute(args: argparse.Namespace) -> int:
    from torchleak.analysis.job import run_report
    from torchleak.check.crossref import annotate
    from torchleak.trace.catalog import resolve_run
    from torchleak.views import get_renderer

    fmt = args.format or _format_for(args.output)
    if fmt == "tensorboard":
        return _tensorboard(args)
    options = {}
    if fmt == "text":
        to_terminal = args.output is None and sys.stdout.isatty()
        options = {"color": to_terminal, "width": _width() if to_terminal else 100}
    renderer = get_renderer(fmt, **options)
    report = run_report(resolve_run(args.run, args.runs_dir), args.rank)
    annotate(report)
    text = renderer.render(report)
    if args.output is None:
        sys.stdout.write(text)
        return 0
    try:
        args.output.write_text(text, encoding="utf-8")
    except OSError as err:
        raise OutputNotWritable(f"cannot write {args.output}: {err.strerror or err}") from None
    print(f"wrote {args.output}", file=sys.stderr)
    return 0


def _tensorboard(args: argparse.Namespace) -> int:
    from torchleak.analysis.job import run_report
    from torchleak.errors import UsageError
    from torchleak.trace.catalog import resolve_run
    from torchleak.views.tensorboard import write_tensorboard

    if args.output is None:
        raise UsageError("--format tensorboard writes event files into a folder: pass "
                         "-o DIR (then: tensorboard --logdir DIR)")
    if args.output.exists() and not args.output.is_dir():
        raise UsageError(f"-o {args.output} is a file: --format tensorboard needs a folder")
    report = run_report(resolve_run(args.run, args.runs_dir), args.rank)
    try:
        count = write_tensorboard(report, args.output)
    except OSError as err:
        raise OutputNotWritable(f"cannot write {args.output}: {err.strerror or err}") from None
    print(f"wrote {count:,} scalars and {len(report.findings)} findings to {args.output} "
          f"(tensorboard --logdir {args.output})", file=sys.stderr)
    return 0


def _format_for(output: Path | None) -> str:
    if output is not None and output.suffix.lower() in (".html", ".htm"):
        return "html"
    if output is not None and output.suffix.lower() == ".json":
        return "json"
    return "text"


def _width() -> int:
    import shutil

    return max(80, min(shutil.get_terminal_size().columns, 160))
