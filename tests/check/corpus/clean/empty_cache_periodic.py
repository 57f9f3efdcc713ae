import torch


def train(model, loader, optimizer):
    for step, batch in enumerate(loader):
        loss = model(batch)
        loss.backward()
        optimizer.step()
        if step % 500 == 0:
            torch.cuda.empty_cache()
