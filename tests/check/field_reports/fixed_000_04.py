# From field report 000, python block 4.
# 🔧 定期清理GPU記憶體
if batch_idx % 50 == 0:  # 每50個batch清理一次
    torch.cuda.empty_cache()
