# From field report 003, python block 2.
# Memory cleanup to prevent memory leak
import gc
if torch.cuda.is_available():
    torch.cuda.empty_cache()
gc.collect()
