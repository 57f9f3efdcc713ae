"""Helpers the integration test modules import by name (``conftest`` is no module name to
import: each test folder has one, and which one ``import conftest`` finds depends on what
pytest collected first)."""

from __future__ import annotations

import importlib.util


def installed(*modules: str) -> bool:
    """Every one of ``modules`` can be imported here (a framework the test drives)."""
    return all(importlib.util.find_spec(m) is not None for m in modules)
