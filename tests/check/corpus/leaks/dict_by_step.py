# expect: TL102
def train(model, loader, optimizer):
    predictions = {}
    for step, batch in enumerate(loader):
        out = model(batch)
        out.mean().backward()
        optimizer.step()
        predictions[step] = out
