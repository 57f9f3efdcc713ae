"""One setting ``--safe`` changes, as the plan lists it and the run prints it."""

from __future__ import annotations

from dataclasses import dataclass

PREFIX = "torchleak --safe:"


@dataclass(frozen=True)
class SafeChange:
    """One setting ``--safe`` changes (or finds already set by the user and keeps)."""

    setting: str
    value: str
    was: str | None  # the value before, None when it was unset
    why: str = ""
    kept: bool = False  # the user's own setting: nothing was changed

    def to_dict(self) -> dict[str, str | None]:
        return {"setting": self.setting, "value": self.value, "was": self.was}

    def line(self) -> str:
        if self.kept:
            return f"{PREFIX} {self.setting}={self.value} kept (set by you)"
        was = "unset" if self.was is None else self.was
        return f"{PREFIX} {self.setting}={self.value} (was {was}): {self.why}"
