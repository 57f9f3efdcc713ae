# From field report 002, python block 4.
x_real = x_real.to(device, non_blocking=True)
label_tensor = label.to(device, non_blocking=True)
