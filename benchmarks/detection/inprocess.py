"""Run a training script under tracemalloc or objgraph the way their documentation finds
leaks: a baseline after warm-up, a second look near the end, compared while the training
loop still runs (a local list is gone once the script returns).

    python inprocess.py tracemalloc --steps 500 --out result.json script.py

The baseline is taken at 25% of the optimizer steps and the comparison at 90%, from a
global optimizer step hook (the script is not changed). What the tool prints goes to
stdout, as a user would read it; the same figures go to ``--out`` for the scorer.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import runpy
import sys
import time
import tracemalloc
from typing import Any


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("tool", choices=("tracemalloc", "objgraph"))
    parser.add_argument("--steps", type=int, required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("script")
    args = parser.parse_args()
    if args.tool == "tracemalloc":
        tracemalloc.start()  # one frame, as the documentation's "top 10" recipe
    import torch.optim.optimizer as optim

    first, last = max(1, int(0.25 * args.steps)), max(2, int(0.9 * args.steps))
    look = Tracemalloc() if args.tool == "tracemalloc" else Objgraph()
    seen = {"steps": 0}

    def on_step(optimizer: Any, a: Any, k: Any) -> None:
        seen["steps"] += 1
        if seen["steps"] == first:
            look.baseline()
        elif seen["steps"] == last:
            result = look.compare(last - first)
            result["window"] = [first, last]
            with open(args.out, "w") as fh:
                json.dump(result, fh, indent=1)

    optim.register_optimizer_step_post_hook(on_step)
    sys.argv = [args.script]
    sys.path.insert(0, os.path.dirname(os.path.abspath(args.script)))
    runpy.run_path(args.script, run_name="__main__")


class Tracemalloc:
    """``snapshot.compare_to(old, 'lineno')``: the top 10 differences, printed."""

    def baseline(self) -> None:
        self.before = tracemalloc.take_snapshot()

    def compare(self, steps: int) -> dict[str, Any]:
        after = tracemalloc.take_snapshot()
        stats = after.compare_to(self.before, "lineno")[:10]
        print(f"[ tracemalloc: top 10 differences over {steps} steps ]")
        top = []
        for stat in stats:
            print(stat)
            top.append({"size_diff": stat.size_diff, "count_diff": stat.count_diff,
                        "frames": [f"{f.filename}:{f.lineno}" for f in stat.traceback]})
        return {"top": top}


class Objgraph:
    """``show_growth()`` twice, then the backreference chain from an object of the type
    that grew most to a module (the documentation's leak-hunting recipe), as text."""

    def baseline(self) -> None:
        import objgraph

        objgraph.show_growth(limit=10, file=open(os.devnull, "w"))

    def compare(self, steps: int) -> dict[str, Any]:
        import objgraph

        growth = objgraph.growth(limit=10)
        print(f"[ objgraph: growth over {steps} steps ]")
        for name, count, delta in growth:
            print(f"{name:30} {count:10} {delta:+10}")
        chain: list[str] = []
        if growth:
            objects = objgraph.by_type(growth[0][0])
            if objects:
                started = time.perf_counter()
                target = random.Random(0).choice(objects)
                found = objgraph.find_backref_chain(target, objgraph.is_proper_module,
                                                    max_depth=10)
                chain = describe(found)
                print(f"backref chain ({time.perf_counter() - started:.1f} s):",
                      " -> ".join(chain) if len(found) > 1 else "none found")
        return {"growth": [[n, c, d] for n, c, d in growth], "chain": chain}


def describe(chain: list[Any]) -> list[str]:
    """Each link as objgraph's chain graph labels it: the module, then the attribute,
    key or index through which each object holds the next."""
    out = []
    for holder, held in zip(chain, chain[1:]):
        out.append(f"{type(holder).__name__}{edge(holder, held)}")
    if chain:
        out.append(type(chain[-1]).__name__)
    return out


def edge(holder: Any, held: Any) -> str:
    if isinstance(holder, type(sys)):
        holder = vars(holder)
        prefix = f"({holder.get('__name__')})"
    else:
        prefix = ""
    if isinstance(holder, dict):
        for key, value in holder.items():
            if value is held:
                return f"{prefix}[{key!r}]"
    if isinstance(holder, (list, tuple)):
        for i, value in enumerate(holder):
            if value is held:
                return f"{prefix}[{i}]"
    attrs = getattr(holder, "__dict__", None)
    if isinstance(attrs, dict) and attrs is held:
        return f"{prefix}.__dict__"
    return prefix


if __name__ == "__main__":
    main()
