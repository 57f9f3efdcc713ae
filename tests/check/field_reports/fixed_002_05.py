# From field report 002, python block 5.
# 釋放不需要的張量
del x_fake, d_real, d_fake, rgbs, dloss_real, dloss_fake, reg, total_d_loss
