# From field report 002, python block 3.
# 初始化損失函數（在循環外創建以節省記憶體）
ccsr_nerf_loss = CCSRNeRFLoss().to(device)
mce_loss = MCE_Loss()
