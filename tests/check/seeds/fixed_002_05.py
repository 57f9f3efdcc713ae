# From /work/shared/seeds/002_d4474b132bca244e.txt, python block 5.
# 釋放不需要的張量
del x_fake, d_real, d_fake, rgbs, dloss_real, dloss_fake, reg, total_d_loss
