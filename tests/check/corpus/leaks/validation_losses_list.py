# expect: TL102 TL301
def validate(model, loader, criterion):
    model.eval()
    losses = []
    for x, y in loader:
        out = model(x)
        losses.append(criterion(out, y))
    return sum(losses) / len(losses)
