# From field report 004, python block 0.
# 错误：张量在列表中累积
all_losses = []
for batch in dataloader:
    loss = model(batch)
    all_losses.append(loss)  # 保持计算图！
