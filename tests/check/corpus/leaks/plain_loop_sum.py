# expect: TL101
def train(model, loader, optimizer, criterion):
    total_loss = 0
    for x, y in loader:
        optimizer.zero_grad()
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
        total_loss += loss
    return total_loss / len(loader)
