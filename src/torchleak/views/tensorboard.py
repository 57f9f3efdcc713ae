"""A Report as TensorBoard event files: every measured series as scalars, the findings
and the verdict as text (``torchleak report RUN --format tensorboard --output DIR``).

Series in bytes are written in MiB (``torchleak/main_uss_mib``), counts as they are;
holders that grew go under ``torchleak/holders/``. ``tensorboard`` (the package) is
imported only here.
"""

from __future__ import annotations

import re
from pathlib import Path

from torchleak.errors import UsageError
from torchleak.report import Report, Signal
from torchleak.views.summary import finding_lines

MIB = float(1 << 20)
PREFIX = "torchleak"


def write_tensorboard(report: Report, folder: Path) -> int:
    """Write the report into ``folder``; returns how many scalars were written."""
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError:
        raise UsageError("the TensorBoard export needs tensorboard: pip install tensorboard"
                         ) from None
    written = 0
    writer = SummaryWriter(log_dir=str(folder))
    try:
        for signal in report.signals:
            tag = scalar_tag(signal)
            scale = MIB if signal.unit == "bytes" else 1.0
            for step, value in zip(signal.steps, signal.values):
                writer.add_scalar(tag, value / scale, int(step))
                written += 1
        writer.add_text(f"{PREFIX}/verdict", f"**{report.verdict}** after {report.steps:,} "
                        f"steps: {report.reason}", report.steps)
        for finding in report.findings:
            text = "  \n".join(line.strip() for line in finding_lines(finding))
            writer.add_text(f"{PREFIX}/findings", text, finding.detected_at_step or report.steps)
    finally:
        writer.close()
    return written


def scalar_tag(signal: Signal) -> str:
    """``torchleak/main_uss_mib``, ``torchleak/holders/LitModel.outputs_mib``."""
    unit = "_mib" if signal.unit == "bytes" else ""
    if signal.name.startswith("holder:"):
        name = re.sub(r"[^\w.\-\[\]()]+", "_", signal.name[len("holder:"):])[:120]
        return f"{PREFIX}/holders/{name}{unit}"
    return f"{PREFIX}/{signal.name}{unit}"
