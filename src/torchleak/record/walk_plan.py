"""When the holder walk and its re-measure run beyond the budget's schedule.

Three reasons, each owed at the next boundaries whatever the budget (a handful of ~1-5 ms
walks, ~10-50 us re-measures):
- a phase just ended (an epoch, a validation): per-epoch leaks show right after it;
- the process grows and no holder explains it (``hunt``): a few full walks spaced so a
  holder that began growing after the walks thinned out shows growth between two of
  them, becomes a suspect and is then sampled densely by the quick re-measure;
- the live detector suspects holders (``confirm``): they are re-measured at the next few
  boundaries, spaced out, so whether they keep growing shows soon.
"""

from __future__ import annotations

from torchleak.record.schedule import MAX_SUSPECTS

# Walks owed to growth no holder explains, and their spacing: at least HUNT_MIN_GAP
# steps, or 1/HUNT_SPREAD of the steps so far (a slow leak needs time to show).
HUNT_WALKS, HUNT_MIN_GAP, HUNT_SPREAD = 3, 5, 40
CONFIRM_SAMPLES = 4  # re-measures of suspected holders after each live look at them
CONFIRM_MIN_GAP, CONFIRM_SPREAD = 2, 40  # spaced by 2 steps or 1/40 of the steps so far


class WalkPlan:
    def __init__(self) -> None:
        self.phase_ended = False
        self._hunt_left = 0
        self._hunt_next = 0
        self._confirming: list[str] = []
        self._confirm_left = 0
        self._confirm_next = 0

    def hunt(self) -> None:
        self._hunt_left, self._hunt_next = HUNT_WALKS, 0

    def confirm(self, paths: list[str]) -> None:
        self._confirming = list(paths)[:MAX_SUSPECTS]
        self._confirm_left, self._confirm_next = CONFIRM_SAMPLES, 0

    def owed(self, step: int) -> bool:
        """Whether a walk or a re-measure is owed at ``step`` (two comparisons)."""
        return self.phase_ended or bool(self._hunt_left and step >= self._hunt_next) or bool(
            self._confirm_left and step >= self._confirm_next)

    def walk_reason(self, step: int) -> str | None:
        """'phase' or 'hunt' when a full walk is owed now (and counted as taken)."""
        if self.phase_ended:
            self.phase_ended = False
            return "phase"
        if self._hunt_left and step >= self._hunt_next:
            self._hunt_left -= 1
            self._hunt_next = step + max(HUNT_MIN_GAP, step // HUNT_SPREAD)
            return "hunt"
        return None

    def walked(self) -> None:
        """A full walk ran (scheduled or anchored): it serves a phase end as well."""
        self.phase_ended = False

    def to_confirm(self, step: int) -> list[str] | None:
        """The suspected holders to re-measure now (counted as taken), or None."""
        if not (self._confirm_left and step >= self._confirm_next):
            return None
        self._confirm_left -= 1
        self._confirm_next = step + max(CONFIRM_MIN_GAP, step // CONFIRM_SPREAD)
        return self._confirming
