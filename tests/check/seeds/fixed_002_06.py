# From /work/shared/seeds/002_d4474b132bca244e.txt, python block 6.
torch.cuda.empty_cache()  # 清理 CUDA 緩存
gc.collect()  # Python 垃圾回收
