# From field report 002, python block 12.
accumulation_steps = 4
for i, (x_real, label) in enumerate(train_loader):
    loss = ... / accumulation_steps
    loss.backward()

    if (i + 1) % accumulation_steps == 0:
        optimizer.step()
        optimizer.zero_grad()
