"""One epoch that keeps each step's detached logits for an end-of-epoch metric, then clears them."""
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
torch.set_num_threads(1)
data = TensorDataset(torch.randn(400 * 32, 128), torch.randint(0, 1000, (400 * 32,)))
loader = DataLoader(data, batch_size=32)
model = torch.nn.Sequential(torch.nn.Linear(128, 256), torch.nn.ReLU(), torch.nn.Linear(256, 1000))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
history = []
for x, y in loader:
    logits = model(x)
    loss = F.cross_entropy(logits, y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    history.append(logits.detach())
top1 = torch.cat(history).argmax(1)
print("epoch top1 mean", float(top1.float().mean()))
history.clear()
print("done")
