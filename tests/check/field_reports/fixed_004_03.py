# From field report 004, python block 3.
# 存储时
stored_output = output.detach().cpu()
