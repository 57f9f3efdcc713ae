# From /work/shared/seeds/004_f5da6e2fa9f34050.txt, python block 2.
# 好的做法
with torch.no_grad():
    output = model(input)
