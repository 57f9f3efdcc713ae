def train(model, loader, optimizer):
    for x, y in loader:
        parts = []
        for chunk in x.split(4):
            parts.append(model(chunk))
        loss = sum(p.sum() for p in parts)
        loss.backward()
        optimizer.step()
