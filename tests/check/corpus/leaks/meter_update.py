# expect: TL102
def train(model, loader, criterion, optimizer, loss_meter):
    for images, target in loader:
        output = model(images)
        loss = criterion(output, target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        loss_meter.update(loss, images.size(0))
