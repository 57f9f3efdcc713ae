"""A wide model under Adam: the optimizer's state appears at the first step, then is flat."""
import torch
import torch.nn.functional as F

torch.manual_seed(0)
torch.set_num_threads(1)
model = torch.nn.Sequential(torch.nn.Linear(512, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 1024),
                            torch.nn.ReLU(), torch.nn.Linear(1024, 10))
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
for step in range(300):
    bs = min(8 * (1 + step // 10), 96)  # batch-size ramp during the first steps
    x, y = torch.randn(bs, 512), torch.randint(0, 10, (bs,))
    loss = F.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
print("done")
