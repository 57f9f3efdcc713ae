# From field report 004, python block 2.
# 好的做法
with torch.no_grad():
    output = model(input)
