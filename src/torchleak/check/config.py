"""``[tool.torchleak]`` in ``pyproject.toml``: each file uses the nearest one above it.

Paths are walked up as given (made absolute, symbolic links not resolved), so a link loop
cannot make the search fail.
"""

from __future__ import annotations

import fnmatch
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from torchleak.check.selection import parse_codes
from torchleak.errors import UsageError

KNOWN_KEYS = {"select", "ignore", "extend-select", "extend-ignore", "exclude",
              "extend-exclude", "per-file-ignores", "extend-per-file-ignores"}


@dataclass(frozen=True)
class Config:
    path: str | None = None
    select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    extend_select: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    # (glob, codes): globs match the path relative to the pyproject.toml's folder, or the
    # file's name
    per_file_ignores: tuple[tuple[str, tuple[str, ...]], ...] = ()

    @property
    def base(self) -> str:
        return os.path.dirname(self.path) if self.path else os.getcwd()

    def ignored_here(self, path: str) -> tuple[str, ...]:
        """The codes ``per-file-ignores`` switches off for ``path``."""
        if not self.per_file_ignores:
            return ()
        absolute = os.path.abspath(path)
        relative = os.path.relpath(absolute, self.base).replace(os.sep, "/")
        name = os.path.basename(absolute)
        codes: list[str] = []
        for pattern, ignored in self.per_file_ignores:
            pat = pattern.removeprefix("./")
            if fnmatch.fnmatch(relative, pat) or fnmatch.fnmatch(name, pat) \
                    or fnmatch.fnmatch(absolute.replace(os.sep, "/"), pat):
                codes.extend(ignored)
        return tuple(codes)


@dataclass
class ConfigFinder:
    """The configuration of each file: ``forced`` (``--config``) for all, none when
    ``isolated``, else the nearest ``pyproject.toml`` with a ``[tool.torchleak]`` table."""

    forced: str | None = None
    isolated: bool = False
    _by_folder: dict[str, Config] = field(default_factory=dict)
    _loaded: dict[str, Config] = field(default_factory=dict)

    def for_path(self, path: str) -> Config:
        if self.isolated:
            return Config()
        if self.forced is not None:
            return self._load(self.forced)
        absolute = os.path.abspath(path if path != "-" else ".")
        folder = absolute if os.path.isdir(absolute) else os.path.dirname(absolute)
        return self._for_folder(folder)

    def _for_folder(self, folder: str) -> Config:
        cached = self._by_folder.get(folder)
        if cached is not None:
            return cached
        pyproject = os.path.join(folder, "pyproject.toml")
        if _has_table(pyproject):
            found = self._load(pyproject)
        else:
            parent = os.path.dirname(folder)
            found = Config() if parent == folder else self._for_folder(parent)
        self._by_folder[folder] = found
        return found

    def _load(self, pyproject: str) -> Config:
        if pyproject not in self._loaded:
            self._loaded[pyproject] = load_config(Path(pyproject))
        return self._loaded[pyproject]


def find_pyproject(paths: list[str]) -> Path | None:
    """The nearest ``pyproject.toml`` with a ``[tool.torchleak]`` table above the first
    path (or the working directory)."""
    found = ConfigFinder().for_path(paths[0] if paths else ".")
    return Path(found.path) if found.path else None


def _has_table(pyproject: str) -> bool:
    try:
        with open(pyproject, encoding="utf-8", errors="replace") as fh:
            return "[tool.torchleak" in fh.read()
    except (OSError, ValueError):
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
    base = os.path.dirname(os.path.abspath(pyproject))
    exclude = _strings(table.get("exclude", []), where) + \
        _strings(table.get("extend-exclude", []), where)
    per_file = _per_file(table.get("per-file-ignores", {}), f"{where} per-file-ignores") + \
        _per_file(table.get("extend-per-file-ignores", {}),
                  f"{where} extend-per-file-ignores")
    return Config(
        path=os.path.abspath(pyproject),
        select=tuple(parse_codes(table.get("select"), f"{where} select")),
        ignore=tuple(parse_codes(table.get("ignore"), f"{where} ignore")
                     + parse_codes(table.get("extend-ignore"), f"{where} extend-ignore")),
        extend_select=tuple(parse_codes(table.get("extend-select"),
                                        f"{where} extend-select")),
        exclude=tuple(p if not p.startswith("./") else os.path.join(base, p[2:])
                      for p in exclude),
        per_file_ignores=per_file,
    )


def _per_file(value: object, where: str) -> tuple[tuple[str, tuple[str, ...]], ...]:
    if not isinstance(value, dict):
        raise UsageError(f"{where}: expected a table of glob = [codes]")
    return tuple((str(pattern), tuple(parse_codes(codes, f"{where} {pattern!r}")))
                 for pattern, codes in value.items())


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
    except (OSError, ValueError) as err:  # TOMLDecodeError is a ValueError
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
