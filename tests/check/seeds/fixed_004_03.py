# From /work/shared/seeds/004_f5da6e2fa9f34050.txt, python block 3.
# 存储时
stored_output = output.detach().cpu()
