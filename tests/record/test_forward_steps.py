"""ForwardSteps on its own: the global hooks and what takes their place."""

from __future__ import annotations

from types import FrameType
from typing import Any

import torch
from torch import nn
from torch.nn.modules import module as torch_module

from torchleak.record.steps import ForwardSteps


def global_hooks() -> int:
    return len(torch_module._global_forward_hooks) + len(torch_module._global_forward_pre_hooks)


class Sealed(type(nn.Module)):  # type: ignore[misc]
    """A metaclass that refuses new class attributes (a framework's frozen classes)."""

    def __setattr__(cls, name: str, value: Any) -> None:
        raise TypeError(f"{cls.__name__} is sealed")


class SealedNet(nn.Module, metaclass=Sealed):
    def __init__(self) -> None:
        super().__init__()
        self.head = nn.Linear(4, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(x)


class Plain(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.head = nn.Linear(4, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(x)


def drive(model: nn.Module, calls: int) -> tuple[ForwardSteps, list[FrameType | None]]:
    boundaries: list[FrameType | None] = []
    steps = ForwardSteps(boundaries.append)
    steps.install()
    try:
        for _ in range(calls):
            model(torch.randn(2, 4))
        # Narrowed by hand: in a process where dynamo is loaded it never is on its own.
        steps._narrow()
        for _ in range(calls):
            model(torch.randn(2, 4))
    finally:
        steps.remove(final=True)
    return steps, boundaries


def test_a_class_that_refuses_our_call_keeps_the_global_hooks_and_every_step() -> None:
    before = global_hooks()
    steps, boundaries = drive(SealedNet(), 20)
    assert not steps.narrowed and global_hooks() == before
    assert len(boundaries) == 40 - 8  # counted by the hooks throughout
    assert "__call__" not in SealedNet.__dict__


def test_a_narrowed_class_counts_every_call_and_is_put_back() -> None:
    before = global_hooks()
    steps, boundaries = drive(Plain(), 20)
    assert steps.narrowed
    assert len(boundaries) == 40 - 8
    assert "__call__" not in Plain.__dict__ and global_hooks() == before
