import torch

all_losses, outputs, stacked = [], [], []
for batch in dataloader:
    out = model(batch)
    loss = out.mean()
    loss.backward()
    all_losses.append(loss.item())
    outputs.append(out.detach())
    stacked.append(loss.detach())
mean = torch.stack(stacked).mean()
