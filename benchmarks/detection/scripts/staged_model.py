"""A model grown in stages (progressive growing), then trained at its final size."""
import torch
import torch.nn.functional as F

torch.manual_seed(0)
torch.set_num_threads(1)
blocks = torch.nn.ModuleList([torch.nn.Linear(256, 256)])
head = torch.nn.Linear(256, 10)


def params():
    return list(blocks.parameters()) + list(head.parameters())


opt = torch.optim.Adam(params(), lr=1e-3)
for step in range(600):
    if step in (60, 120, 180):
        blocks.append(torch.nn.Linear(256, 256))
        opt = torch.optim.Adam(params(), lr=1e-3)
    x, y = torch.randn(64, 256), torch.randint(0, 10, (64,))
    h = x
    for block in blocks:
        h = torch.relu(block(h))
    loss = F.cross_entropy(head(h), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
print("done")
