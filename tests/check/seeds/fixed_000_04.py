# From /work/shared/seeds/000_263d746fc1c1590e.txt, python block 4.
# 🔧 定期清理GPU記憶體
if batch_idx % 50 == 0:  # 每50個batch清理一次
    torch.cuda.empty_cache()
