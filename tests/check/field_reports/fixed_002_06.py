# From field report 002, python block 6.
torch.cuda.empty_cache()  # 清理 CUDA 緩存
gc.collect()  # Python 垃圾回收
