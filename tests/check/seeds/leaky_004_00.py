# From /work/shared/seeds/004_f5da6e2fa9f34050.txt, python block 0.
# 错误：张量在列表中累积
all_losses = []
for batch in dataloader:
    loss = model(batch)
    all_losses.append(loss)  # 保持计算图！
