# expect: TL109
import torch
from torch.profiler import ProfilerActivity


def fit(model, optimizer, loader, loss_fn):
    prof = torch.profiler.profile(activities=[ProfilerActivity.CPU], record_shapes=True)
    prof.start()
    for batch, target in loader:
        loss = loss_fn(model(batch), target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    prof.stop()
    print(prof.key_averages().table(sort_by="cpu_time_total", row_limit=10))
