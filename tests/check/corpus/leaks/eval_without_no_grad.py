# expect: TL301
def validate(model, val_loader, criterion):
    model.eval()
    correct = 0
    for x, y in val_loader:
        out = model(x)
        correct += (out.argmax(1) == y).sum().item()
    return correct
