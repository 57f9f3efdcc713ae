"""DQN-style replay buffer: a deque with maxlen, filled by step ~330, then recycled."""
import collections
import random

import numpy as np
import torch
import torch.nn.functional as F

torch.manual_seed(0)
torch.set_num_threads(1)
random.seed(0)
rng = np.random.default_rng(0)
q = torch.nn.Sequential(torch.nn.Linear(256, 128), torch.nn.ReLU(), torch.nn.Linear(128, 4))
opt = torch.optim.Adam(q.parameters(), lr=1e-3)
replay = collections.deque(maxlen=16000)
obs = rng.standard_normal(256).astype(np.float32)
for step in range(900):
    for _ in range(48):
        nxt = rng.standard_normal(256).astype(np.float32)
        replay.append((obs, int(rng.integers(4)), float(rng.random()), nxt))
        obs = nxt
    batch = random.sample(replay, min(64, len(replay)))
    s = torch.from_numpy(np.stack([b[0] for b in batch]))
    a = torch.tensor([b[1] for b in batch])
    r = torch.tensor([b[2] for b in batch])
    pred = q(s).gather(1, a[:, None]).squeeze(1)
    loss = F.mse_loss(pred, r)
    opt.zero_grad()
    loss.backward()
    opt.step()
print("done")
