"""The program's own ``import torch`` is waited for, never made: callbacks as it begins
and once it has ended."""

from __future__ import annotations

import subprocess
import sys
import textwrap

SCRIPT = """
    import sys

    from torchleak.live.torch_import import when_torch_imported

    seen = []
    when_torch_imported(lambda: seen.append(("after", "torch.optim" in sys.modules)),
                        before=lambda: seen.append(("before", "torch._C" in sys.modules)))
    cancelled = when_torch_imported(lambda: seen.append("cancelled"),
                                    before=lambda: seen.append("cancelled"))
    cancelled()
    print("torch imported by then:", "torch" in sys.modules)
    import torch

    print(seen)
    when_torch_imported(lambda: seen.append("now"), before=lambda: seen.append("never"))
    print(seen[-1])
"""


def test_callbacks_run_as_torchs_import_begins_and_once_it_ends() -> None:
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(SCRIPT)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == "torch imported by then: False"  # waiting imported nothing
    # before: none of torch loaded yet; after: its __init__ has run (torch.optim in)
    assert lines[1] == "[('before', False), ('after', True)]", lines
    assert lines[2] == "now"  # torch already imported: the callback at once, no `before`
