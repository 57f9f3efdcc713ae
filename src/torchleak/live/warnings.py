"""When a live warning is worth printing: the first call of a leak, then only when
something material changes, and never more than ``MAX_PER_HOUR`` blocks an hour."""

from __future__ import annotations

from collections import deque

from torchleak.report import Finding, Report

MAX_PER_HOUR = 4
MIN_GAP_SECONDS = 60.0


class WarningPolicy:
    def __init__(self) -> None:
        self._printed: deque[float] = deque()
        self._holders: set[str] = set()
        self._seconds: float | None = None

    def warning(self, report: Report, fired: list[Finding], now: float) -> str | None:
        """The block to print now, or None."""
        serious = report.called
        if not serious:
            return None
        top = serious[0]
        seconds = top.oom.seconds_to_oom if top.oom is not None else None
        holders = {f.holder_path or f.signal for f in serious}
        first = not self._printed
        new_holder = bool(holders - self._holders) and any(f.called for f in fired)
        halved = (seconds is not None and self._seconds is not None
                  and seconds <= self._seconds / 2)
        while self._printed and now - self._printed[0] > 3600:
            self._printed.popleft()
        if not first and (len(self._printed) >= MAX_PER_HOUR
                          or now - self._printed[-1] < MIN_GAP_SECONDS
                          or not (new_holder or halved)):
            return None
        self._printed.append(now)
        self._holders |= holders
        self._seconds = seconds
        from torchleak.views.live import format_warning

        return format_warning(report, again=not first)
