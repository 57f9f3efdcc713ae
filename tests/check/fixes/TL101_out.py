def train(model, loader, optimizer, criterion):
    total_loss = 0
    stats = {"sum": 0}
    for x, y in loader:
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
        total_loss += loss.item()
        stats["sum"] += (loss * 2).detach()  # keep this comment
    return total_loss
