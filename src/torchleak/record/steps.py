"""What one training step is, and how its boundary is found with no code changes.

A *step* is one cycle of optimizer updates. With one optimizer it is one
``optimizer.step()`` call (gradient accumulation therefore counts one step per real
update, not per micro-batch). With several optimizers stepping in turn (a GAN's D and G) the cycle is learned from the first calls: the boundary is after the
optimizer that closes the cycle, so a D/G loop counts one step per D+G pair. An
optimizer that only steps occasionally never becomes the boundary. If the boundary
optimizer stops stepping while another keeps stepping (a new optimizer for a second
training stage), the other one takes over.

Loops without a ``torch.optim`` optimizer call ``torchleak.watch().step()``; once that
is used, optimizer calls no longer count.
"""

from __future__ import annotations


class StepClock:
    """Turns optimizer ``step()`` calls into step boundaries."""

    def __init__(self) -> None:
        self._closer: int | None = None  # id() of the optimizer that closes a cycle
        self._learning = True  # still inside the first cycle
        self._first_cycle: set[int] = set()
        self._since_boundary: dict[int, int] = {}
        self.manual = False

    def observe(self, optimizer_id: int) -> bool:
        """Record one optimizer.step(); True when it closes a training step."""
        if self.manual:
            return False
        if self._closer is None:
            self._closer = optimizer_id
            self._first_cycle.add(optimizer_id)
            return True
        if self._learning:
            if optimizer_id in self._first_cycle:
                self._learning = False  # the cycle repeats: its last newcomer closes it
            else:
                self._first_cycle.add(optimizer_id)
                self._closer = optimizer_id
                return False
        if optimizer_id == self._closer:
            self._since_boundary.clear()
            return True
        calls = self._since_boundary.get(optimizer_id, 0) + 1
        self._since_boundary[optimizer_id] = calls
        if calls >= 2:
            # The closer went quiet while this one keeps stepping: it takes over.
            self._closer = optimizer_id
            self._since_boundary.clear()
            return True
        return False

    def manual_step(self) -> bool:
        self.manual = True
        return True
