# From /work/shared/seeds/002_d4474b132bca244e.txt, python block 4.
x_real = x_real.to(device, non_blocking=True)
label_tensor = label.to(device, non_blocking=True)
