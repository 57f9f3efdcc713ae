# From /work/shared/seeds/003_8e27486a8d0fd3e1.txt, python block 2.
# Memory cleanup to prevent memory leak
import gc
if torch.cuda.is_available():
    torch.cuda.empty_cache()
gc.collect()
