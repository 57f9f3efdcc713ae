"""A policy-gradient loop whose replay list is never trimmed."""
import torch
from torch import nn

policy = nn.Sequential(nn.Linear(4, 64), nn.Tanh(), nn.Linear(64, 2))
optimizer = torch.optim.Adam(policy.parameters(), lr=1e-3)
replay = []
step = 0
obs = torch.randn(4)

while step < 100_000:
    logits = policy(obs)
    action = torch.distributions.Categorical(logits=logits).sample()
    next_obs, reward = torch.randn(4), torch.randn(())
    replay.append((obs.clone(), action, reward, next_obs))
    loss = -(logits.log_softmax(-1)[action] * reward)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    obs = next_obs
    step += 1
