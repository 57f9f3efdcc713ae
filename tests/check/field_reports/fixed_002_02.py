# From field report 002, python block 2.
d_optimizer.zero_grad(set_to_none=True)  # 節省記憶體
g_optimizer.zero_grad(set_to_none=True)
