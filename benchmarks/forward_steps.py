"""Training-thread cost of forward-based step boundaries (loops with no optimizer).

Times the forward of small models with and without the two global forward hooks that
``torchleak.record.steps.ForwardSteps`` installs, and reports the cost per module call and
per outermost forward. Run: ``python benchmarks/forward_steps.py``.
"""

from __future__ import annotations

import time

import torch
from torch import nn

from torchleak.record.steps import ForwardSteps


def mean_forward(model: nn.Module, x: torch.Tensor, repeats: int) -> float:
    with torch.no_grad():
        start = time.perf_counter()
        for _ in range(repeats):
            model(x)
    return (time.perf_counter() - start) / repeats


def compare(model: nn.Module, x: torch.Tensor, repeats: int = 500, rounds: int = 9
            ) -> tuple[float, float]:
    """Best mean forward time without and with the hooks, measured in alternation so a
    busy machine slows both alike."""
    plain, hooked = float("inf"), float("inf")
    steps = ForwardSteps(lambda frame: None)
    for _ in range(rounds):
        plain = min(plain, mean_forward(model, x, repeats))
        steps.install()
        hooked = min(hooked, mean_forward(model, x, repeats))
        steps.remove()
    return plain, hooked


def modules_called(model: nn.Module) -> int:
    return sum(1 for _ in model.modules())


def main() -> None:
    torch.set_num_threads(1)
    models = {
        "Linear(16, 4)": nn.Linear(16, 4),
        "MLP, 12 modules": nn.Sequential(*[m for _ in range(6) for m in (nn.Linear(16, 16), nn.ReLU())]),
        "TransformerEncoder, 2 layers": nn.TransformerEncoder(
            nn.TransformerEncoderLayer(32, 2, 64, batch_first=True), 2, enable_nested_tensor=False),
    }
    inputs = {"Linear(16, 4)": torch.randn(8, 16), "MLP, 12 modules": torch.randn(8, 16),
              "TransformerEncoder, 2 layers": torch.randn(4, 8, 32)}
    print(f"{'model':32} {'modules':>7} {'plain us':>9} {'hooked us':>9} {'+us/fwd':>8} "
          f"{'+us/module':>10}")
    for name, model in models.items():
        count = modules_called(model)
        plain, hooked = compare(model.eval(), inputs[name])
        extra = (hooked - plain) * 1e6
        print(f"{name:32} {count:7d} {plain * 1e6:9.1f} {hooked * 1e6:9.1f} {extra:8.1f} "
              f"{extra / count:10.2f}")


if __name__ == "__main__":
    main()
