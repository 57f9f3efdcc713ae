"""How fast is ``torchleak check``? Prints lines per second on a generated tree.

    python benchmarks/check_speed.py [--lines 100000] [--jobs N]

Not a test: timings depend on the machine. The tree mixes leaky and clean training code,
Lightning modules and plain helpers, so every rule does real work.
"""

from __future__ import annotations

import argparse
import ast
import os
import random
import tempfile
import time
from pathlib import Path

from torchleak.check import check_paths

TEMPLATES = [
    '''
import torch
import matplotlib.pyplot as plt


def train_{n}(model, loader, optimizer, criterion):
    total = 0
    history = []
    for step, (x, y) in enumerate(loader):
        out = model(x)
        loss = criterion(out, y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        total += loss
        history.append(loss.item())
        if step % 100 == 0:
            fig = plt.figure()
            plt.plot(history)
            plt.savefig("loss_{n}.png")
    return total
''',
    '''
import torch


class Model{n}(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = torch.nn.ModuleList([torch.nn.Linear(8, 8) for _ in range(4)])
        self.grad_norms = []

    def forward(self, x):
        feats = []
        for layer in self.layers:
            x = layer(x)
            feats.append(x)
        return x, feats

    def training_step(self, batch, batch_idx):
        out, _ = self(batch)
        loss = out.pow(2).mean()
        self.grad_norms.append(float(loss))
        return loss


@torch.no_grad()
def evaluate_{n}(model, val_loader):
    scores = []
    for x, y in val_loader:
        scores.append(model(x)[0].argmax(-1).eq(y).float().mean().item())
    return sum(scores) / len(scores)
''',
    '''
def helper_{n}(values, scale=1.0):
    """A plain helper with no torch in sight."""
    out = {{}}
    for i, v in enumerate(values):
        if v is None:
            continue
        out[i] = v * scale
    return out


class Config{n}:
    def __init__(self, **kwargs):
        self.options = dict(kwargs)

    def get(self, key, default=None):
        return self.options.get(key, default)
''',
]


def make_tree(root: Path, target_lines: int) -> int:
    rng = random.Random(0)
    lines, n = 0, 0
    while lines < target_lines:
        folder = root / f"pkg{n // 50}"
        folder.mkdir(exist_ok=True)
        picks = rng.choices(TEMPLATES, weights=[1, 3, 6], k=8)  # mostly ordinary code
        text = "\n".join(t.format(n=n + i) for i, t in enumerate(picks))
        (folder / f"mod{n}.py").write_text(text)
        lines += text.count("\n") + 1
        n += 1
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=100_000)
    parser.add_argument("--jobs", type=int, default=None)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        lines = make_tree(Path(tmp), args.lines)
        files = sorted(Path(tmp).rglob("*.py"))
        start = time.perf_counter()
        for path in files:
            ast.parse(path.read_text())
        parse_only = time.perf_counter() - start
        print(f"baseline: ast.parse alone reads {lines / parse_only:,.0f} lines/s here")
        files = len(files)
        for jobs in ([args.jobs] if args.jobs else [1, os.cpu_count() or 1]):
            best, found = float("inf"), 0
            for _ in range(args.repeat):
                start = time.perf_counter()
                found = len(check_paths([tmp], jobs=jobs))
                best = min(best, time.perf_counter() - start)
            print(f"jobs={jobs}: {lines} lines in {files} files: {best:.2f} s "
                  f"({lines / best:,.0f} lines/s), {found} findings")


if __name__ == "__main__":
    main()
