"""``[tool.torchleak]`` in ``pyproject.toml``, found by walking up from the checked paths."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from torchleak.check.selection import parse_codes
from torchleak.errors import UsageError

KNOWN_KEYS = {"select", "ignore", "extend-select", "extend-ignore", "exclude",
              "extend-exclude"}


@dataclass
class Config:
    path: str | None = None
    select: list[str] = field(default_factory=list)
    ignore: list[str] = field(default_factory=list)
    extend_select: list[str] = field(default_factory=list)
    exclude: list[str] = field(default_factory=list)


def find_pyproject(paths: list[str]) -> Path | None:
    """The nearest ``pyproject.toml`` with a ``[tool.torchleak]`` table above the first
    checked path (or the working directory)."""
    start = Path(paths[0] if paths and paths[0] != "-" else ".").resolve()
    folder = start if start.is_dir() else start.parent
    for candidate in (folder, *folder.parents):
        pyproject = candidate / "pyproject.toml"
        if pyproject.is_file() and _has_table(pyproject):
            return pyproject
    return None


def _has_table(pyproject: Path) -> bool:
    try:
        return "[tool.torchleak" in pyproject.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False


def load_config(pyproject: Path | None) -> Config:
    if pyproject is None:
        return Config()
    table = _read_table(pyproject)
    unknown = set(table) - KNOWN_KEYS
    if unknown:
        raise UsageError(f"{pyproject}: unknown key(s) in [tool.torchleak]: "
                         f"{', '.join(sorted(unknown))} (known: {', '.join(sorted(KNOWN_KEYS))})")
    where = f"{pyproject} [tool.torchleak]"
    base = pyproject.parent
    exclude = _strings(table.get("exclude", []), where) + \
        _strings(table.get("extend-exclude", []), where)
    return Config(
        path=str(pyproject),
        select=parse_codes(table.get("select"), f"{where} select"),
        ignore=parse_codes(table.get("ignore"), f"{where} ignore")
        + parse_codes(table.get("extend-ignore"), f"{where} extend-ignore"),
        extend_select=parse_codes(table.get("extend-select"), f"{where} extend-select"),
        exclude=[p if not p.startswith("./") else str(base / p[2:]) for p in exclude],
    )


def _read_table(pyproject: Path) -> dict[str, Any]:
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        try:
            import tomli as tomllib  # type: ignore[no-redef]
        except ModuleNotFoundError:
            raise UsageError("reading pyproject.toml needs Python 3.11+ or `pip install "
                             "tomli`") from None
    try:
        with open(pyproject, "rb") as fh:
            data = tomllib.load(fh)
    except (OSError, tomllib.TOMLDecodeError) as err:
        raise UsageError(f"cannot read {pyproject}: {err}") from None
    table = data.get("tool", {}).get("torchleak", {})
    if not isinstance(table, dict):
        raise UsageError(f"{pyproject}: [tool.torchleak] must be a table")
    return table


def _strings(value: object, where: str) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return [v.replace("/", os.sep) for v in value]
    raise UsageError(f"{where}: exclude must be a list of glob strings")
