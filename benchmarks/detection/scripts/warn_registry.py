"""Clipping warnings with the batch and value in the message, routed to logging."""
import logging
import warnings

import torch
import torch.nn.functional as F

logging.captureWarnings(True)
logging.getLogger("py.warnings").setLevel(logging.ERROR)
torch.manual_seed(0)
torch.set_num_threads(1)
model = torch.nn.Linear(64, 10)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(1200):
    x, y = torch.randn(32, 64), torch.randint(0, 10, (32,))
    loss = F.cross_entropy(model(x), y)
    for i in range(40):
        warnings.warn(f"batch {step} sample {i}: clipped value {float(x[i % 32, 1]):.6f}")
    opt.zero_grad()
    loss.backward()
    opt.step()
print("done")
