"""Fixtures for the analysis tests: in-process recording of small real training loops."""

from __future__ import annotations

import sys
from pathlib import Path

# The helpers live beside this file; make them importable whatever pytest's import mode.
sys.path.insert(0, str(Path(__file__).parent))
