# From /work/shared/seeds/002_d4474b132bca244e.txt, python block 2.
d_optimizer.zero_grad(set_to_none=True)  # 節省記憶體
g_optimizer.zero_grad(set_to_none=True)
