# expect: TL201
def train(model, loader, criterion, optimizer, hidden):
    for x, y in loader:
        optimizer.zero_grad()
        out, hidden = model(x, hidden)
        loss = criterion(out, y)
        loss.backward(retain_graph=True)
        optimizer.step()
