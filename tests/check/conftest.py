from __future__ import annotations

from pathlib import Path

import pytest

HERE = Path(__file__).parent


@pytest.fixture
def fixtures_dir() -> Path:
    return HERE / "fixtures"
