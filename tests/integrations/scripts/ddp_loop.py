"""A torchrun DDP loop on CPU (gloo); rank 1 alone keeps every step's loss with its graph.

torchrun --nproc_per_node=2 -m torchleak run --out DIR ddp_loop.py [STEPS]
"""

from __future__ import annotations

import sys

import torch
import torch.distributed as dist
from torch import nn


def main() -> None:
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(rank)
    model = nn.parallel.DistributedDataParallel(nn.Linear(32, 4))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    kept = []
    for _ in range(int(sys.argv[1]) if len(sys.argv) > 1 else 60):
        loss = model(torch.randn(16, 32)).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if rank == 1:
            kept.append(loss)
    dist.destroy_process_group()
    print(f"rank {rank} done", flush=True)


if __name__ == "__main__":
    main()
