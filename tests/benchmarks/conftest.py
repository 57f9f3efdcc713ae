"""The benchmark tests' helper (``benchkit``) lives beside this file: make it importable
whatever pytest's import mode."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
