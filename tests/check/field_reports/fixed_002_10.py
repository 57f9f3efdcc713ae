# From field report 002, python block 10.
# 初始化 scaler
scaler_d = torch.cuda.amp.GradScaler(enabled=use_amp)
scaler_g = torch.cuda.amp.GradScaler(enabled=use_amp)

# 訓練時使用
with torch.cuda.amp.autocast(enabled=use_amp):
    d_real, _ = discriminator(rgbs, label)
    dloss_real = compute_loss(d_real, 1)

scaler_d.scale(total_d_loss).backward()
scaler_d.step(d_optimizer)
scaler_d.update()
