"""Adversarial training (PGD) with the whole loop inside one bfloat16 autocast block."""
import torch
import torch.nn.functional as F

torch.manual_seed(0)
torch.set_num_threads(1)
model = torch.nn.Sequential(torch.nn.Linear(512, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
with torch.autocast("cpu", dtype=torch.bfloat16):
    for step in range(500):
        x, y = torch.randn(128, 512), torch.randint(0, 10, (128,))
        x_adv = x.clone().requires_grad_(True)
        for _ in range(2):
            adv_loss = F.cross_entropy(model(x_adv), y)
            grad, = torch.autograd.grad(adv_loss, x_adv)
            x_adv = (x_adv + 0.01 * grad.sign()).detach().requires_grad_(True)
        loss = F.cross_entropy(model(x_adv), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
print("done")
