"""REINFORCE: the per-episode buffers are made anew for every episode."""
import torch
from torch import nn

policy = nn.Sequential(nn.Linear(4, 32), nn.Tanh(), nn.Linear(32, 2))
optimizer = torch.optim.Adam(policy.parameters(), lr=1e-2)

for episode in range(1000):
    log_probs, rewards = [], []
    obs = torch.randn(4)
    for t in range(200):
        dist = torch.distributions.Categorical(logits=policy(obs))
        action = dist.sample()
        log_probs.append(dist.log_prob(action))
        rewards.append(float(torch.rand(())))
        obs = torch.randn(4)
    returns = torch.tensor(rewards).flip(0).cumsum(0).flip(0)
    loss = -(torch.stack(log_probs) * returns).sum()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
