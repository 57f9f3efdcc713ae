"""Positional tables cached with functools.lru_cache(maxsize=24): fills in ~100 steps."""
import functools

import torch
import torch.nn.functional as F

torch.manual_seed(0)
torch.set_num_threads(1)


@functools.lru_cache(maxsize=24)
def relative_bias(length: int) -> torch.Tensor:
    pos = torch.arange(length, dtype=torch.float32)
    return -(pos[:, None] - pos[None, :]).abs().repeat(4, 1, 1) / length


model = torch.nn.Linear(64, 64)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(700):
    length = 256 + 8 * ((step // 4) % 24)
    x = torch.randn(length, 64)
    bias = relative_bias(length)
    h = model(x)
    attn = (h @ h.T / 8 + bias.mean(0)).softmax(-1)
    loss = (attn @ h).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
print("done")
