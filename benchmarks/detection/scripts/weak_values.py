"""Uploads kept in a weak-valued mapping keyed by their requests."""
import weakref

import torch
import torch.nn.functional as F

torch.manual_seed(0)
torch.set_num_threads(1)


class Upload:
    def __init__(self, data):
        self.data = data


class Request:
    def __init__(self, upload):
        self.upload = upload  # the key keeps its own value alive


uploads = weakref.WeakValueDictionary()
model = torch.nn.Linear(128, 10)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(600):
    x, y = torch.randn(64, 128), torch.randint(0, 10, (64,))
    up = Upload(x.clone().repeat(3, 1))
    uploads_key = Request(up)
    uploads[uploads_key] = up
    loss = F.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
print("done")
